"""RULER's questions: rendered from each record's ``meta`` with the wording of
``prompts/ruler.yaml`` (:mod:`chunkwise.data.ruler`), and RULER's output budget per task kind.
"""

from __future__ import annotations

from typing import Any

from chunkwise.benchmarks.queries import check_kind
from chunkwise.errors import BadInput


def answer_budget(task: str, window: int | None = None) -> int:
    """RULER's output budget for the task kind, capped at a quarter of ``window``."""
    from chunkwise.data import ruler

    budget = int(ruler.templates()["kinds"][ruler.TASKS[task].kind]["max_answer_tokens"])
    return min(budget, max(16, window // 4)) if window else budget


def build_query(task: str, example: dict[str, Any], kind: str = "chat", window: int | None = None):
    """The :class:`~chunkwise.strategies.Query` for ``example``; kind is chat | base.

    The question is rendered from the record's ``meta`` (records from other writers without
    it are asked their ``input`` as it stands)."""
    from chunkwise.data import ruler
    from chunkwise.strategies import Query

    if task not in ruler.TASKS:
        raise BadInput(f"unknown ruler task {task!r}; valid tasks: {', '.join(ruler.TASKS)}")
    check_kind(kind)
    spec = ruler.templates()["kinds"][ruler.TASKS[task].kind]
    meta = example.get("meta") or {}
    if meta:
        question = ruler.render_question(task, meta, kind)
        prefix = ruler.render_answer_prefix(task, meta) if kind == "base" else ""
    else:
        question, prefix = (example.get("input") or "").strip(), ""
    if not question.strip():
        raise BadInput(f"{task} id {example.get('id')!r}: the question is empty")
    return Query(
        question,
        task=spec["family"],
        answer_prefix=prefix,
        max_answer_tokens=answer_budget(task, window),
    )


def task_config(task: str, kind: str, templates: Any = None) -> dict[str, Any]:
    """What defines a task (hashed into results.json): its generator settings, the needle
    formats and the question wording for ``kind``."""
    import dataclasses

    from chunkwise.data import ruler

    spec = ruler.TASKS[task]
    wording = ruler.templates()["kinds"][spec.kind]
    return {
        "task": task,
        "version": ruler.prompt_version(),
        "definition": dataclasses.asdict(spec),
        "needles": ruler.templates()["needles"],
        "question": wording[kind],
        "answer_prefix": wording["answer_prefix"] if kind == "base" else {},
        "max_answer_tokens": wording["max_answer_tokens"],
        "family": wording["family"],
    }


__all__ = ["answer_budget", "build_query", "task_config"]
