"""InfiniteBench's questions: each task's :class:`~chunkwise.strategies.Query` for a strategy.

The task's question in chat or base wording (``prompts.yaml`` in this package), its options,
the answer prefix base models continue and the official output budget; or, with templates
read from a user's copy of the official ``src/prompt.py`` (:mod:`.templates`), the official
prompt filled as the official scripts fill it.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

from chunkwise.benchmarks.infinitebench.labels import TASKS
from chunkwise.benchmarks.infinitebench.loader import check_task
from chunkwise.benchmarks.queries import check_kind
from chunkwise.errors import BadInput
from chunkwise.prompts import load_prompt_file


@cache
def task_prompts() -> dict[str, Any]:
    """``prompts.yaml``: per-task family, budgets and question wording."""
    data = load_prompt_file("chunkwise.benchmarks.infinitebench", "prompts.yaml")
    missing = [t for t in TASKS if t not in data.get("tasks", {})]
    if missing:  # pragma: no cover - a packaging error
        raise BadInput(f"benchmarks/infinitebench/prompts.yaml lacks tasks {missing}")
    return data


_KV_KEY = re.compile(r'Key:\s*"([^"]+)"')
_FUNC_CALL = re.compile(r"func_[0-9]+\(-?[0-9]+\)")
_FIND_TARGET = re.compile(r"The (.+?) of the list", re.IGNORECASE)


def _fields(task: str, example: dict[str, Any]) -> dict[str, str]:
    """Values the question templates can use, pulled out of the example's ``input``."""
    text = (example.get("input") or "").strip()
    out = {"input": text}
    if task == "kv_retrieval":
        m = _KV_KEY.search(text)
        out["key"] = m.group(1) if m else text
    elif task == "code_run":
        m = _FUNC_CALL.search(text)
        if not m:
            raise BadInput(f"code_run id {example['id']}: no func_N(x) call in the input {text!r}")
        out["func_call"] = m.group(0)
        out["func"] = m.group(0).split("(")[0]
    elif task == "math_find":
        m = _FIND_TARGET.search(text) or re.search(r"The (.+?) of", text)
        if not m:
            raise BadInput(f"math_find id {example['id']}: cannot tell what to find from {text!r}")
        out["target"] = m.group(1).strip().lower()
    return out


def answer_budget(task: str, window: int | None = None, kind: str | None = None) -> int:
    """The official output budget (or our chat wording's own, for ``kind="chat"`` where a task
    has one), capped at a quarter of ``window`` (when given)."""
    spec = task_prompts()["tasks"][task]
    budget = int(spec["max_answer_tokens"])
    if kind == "chat" and spec.get("chat_max_answer_tokens"):
        budget = int(spec["chat_max_answer_tokens"])
    if window:
        return min(budget, max(16, window // 4))
    return budget


#: stands in for the document while a prompt template is filled
_DOC = "\x00chunkwise-document\x00"


def _lettered(options: list[str]) -> str:
    return "\n".join(f"{'ABCDEFGHIJ'[i]}. {o}" for i, o in enumerate(options))


def _question(spec: dict[str, Any], kind: str, values: dict[str, str]) -> str:
    text = spec[kind].format(**values)
    return "\n".join(line for line in text.splitlines() if line.strip()).strip()


def _frame(task: str, spec: dict[str, Any], kind: str, values: dict[str, str]) -> tuple[str, str]:
    text = spec["prompt"][kind].format(document=_DOC, **values)
    before, _, after = text.partition(_DOC)
    return before, after


def build_query(
    task: str,
    example: dict[str, Any],
    kind: str = "chat",
    window: int | None = None,
    *,
    templates: Any = None,
    truncation: str = "document",
):
    """The :class:`Query` a strategy answers for ``example``; ``kind`` is chat | base.

    The query carries both the question multi-call strategies ask and the whole single-call
    prompt (``frame``) standard decoding sends: ours from ``prompts.yaml``, or,
    with ``templates`` (an :class:`~chunkwise.benchmarks.infinitebench.templates.TemplateSet` read from a
    user's copy of InfiniteBench's ``src/prompt.py``), the official one filled as the
    official scripts fill it. ``truncation`` is passed on to the strategy.
    """
    from chunkwise.strategies import Query

    check_task(task)
    check_kind(kind)
    spec = task_prompts()["tasks"][task]
    values = _fields(task, example)
    options = list(example.get("options") or [])
    prefix = spec["answer_prefix"].format(**values) if kind == "base" else ""
    values.update(options=_lettered(options), answer_prefix=prefix)
    if templates is not None:
        from chunkwise.benchmarks.infinitebench import templates as official

        # (gpt4's math_calc template is the bare context: our question stands in for it)
        question = official.question_of(templates, task, example) or _question(spec, kind, values)
        frame = official.frame(templates, task, example)
        budget = answer_budget(task, window)
    else:
        question = _question(spec, kind, values)
        frame = _frame(task, spec, kind, values)
        budget = answer_budget(task, window, kind)
    if not question:
        raise BadInput(f"{task} id {example['id']}: the question is empty (no input?)")
    return Query(
        question,
        task=spec["family"],
        options=tuple(options) if templates is None else (),
        answer_prefix=prefix,
        max_answer_tokens=budget,
        frame=frame,
        truncation=truncation,
        hint=spec.get("hint"),
    )


def task_config(task: str, kind: str, templates: Any = None) -> dict[str, Any]:
    """What defines a task's prompts (hashed into results.json's ``task_hashes``)."""
    spec = task_prompts()["tasks"][task]
    out: dict[str, Any] = {"task": task, "kind": kind, "version": prompt_version(), "spec": spec}
    if templates is not None:
        out["official_template"] = templates.template(task)
        out["official_family"] = templates.family
    return out


def prompt_version() -> str:
    return str(task_prompts().get("version", "0"))


__all__ = ["answer_budget", "build_query", "prompt_version", "task_config", "task_prompts"]
