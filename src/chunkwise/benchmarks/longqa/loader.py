"""LongQA's loader: book QA (InfiniteBench En.QA), book multiple choice (En.MC) and
NarrativeQA as examples of three tasks.

* ``en_qa`` — InfiniteBench ``longbook_qa_eng`` (references: a list of strings)
* ``en_mc`` — InfiniteBench ``longbook_choice_eng`` (answer ``{letter, text, options}``)
* ``narrativeqa`` — :mod:`chunkwise.benchmarks.narrativeqa.loader` (references: a list of
  strings)

``--data``: ``hub`` (InfiniteBench and NarrativeQA at their pinned revisions) or a folder with
InfiniteBench's official ``longbook_qa_eng.jsonl`` / ``longbook_choice_eng.jsonl`` and a
``narrativeqa/`` sub-folder (or ``narrativeqa.jsonl``) of NarrativeQA rows.

Contexts are kept whole: HELMET truncates them to its input length for one-pass models,
whereas chunked strategies read everything. Every example keeps the shape
``{id, context, input, answer, options}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chunkwise.benchmarks.data_spec import DataSpec
from chunkwise.benchmarks.types import TaskData
from chunkwise.errors import BadInput

TASKS = ("en_qa", "en_mc", "narrativeqa")
INFINITEBENCH_TASK = {"en_qa": "longbook_qa_eng", "en_mc": "longbook_choice_eng"}
DISPLAY = {"en_qa": "LongQA En.QA", "en_mc": "LongQA En.MC", "narrativeqa": "LongQA NarrativeQA"}


def parse_data_spec(data: str) -> str | Path:
    text = (data or "").strip()
    if text == "hub":
        return "hub"
    path = Path(text).expanduser()
    if text and path.is_dir():
        return path
    raise BadInput(
        f"--data {data!r}: expected 'hub' or a folder with longbook_qa_eng.jsonl, "
        "longbook_choice_eng.jsonl and narrativeqa/ (NarrativeQA rows)"
    )


def _narrativeqa_source(spec: str | Path) -> str:
    if spec == "hub":
        return "hub:test"
    assert isinstance(spec, Path)
    for cand in (spec / "narrativeqa", spec / "narrativeqa.jsonl"):
        if cand.exists():
            return str(cand)
    raise BadInput(f"{spec}: no narrativeqa/ folder or narrativeqa.jsonl for the NarrativeQA task")


def load_task(
    task: str,
    spec: str | Path,
    *,
    limit: int | None = None,
    revision: str | None = None,
    seed: int = 0,
    count_tokens: Any = None,
) -> TaskData:
    if task not in TASKS:
        raise BadInput(f"unknown LongQA task {task!r}; valid: {', '.join(TASKS)}")
    if task == "narrativeqa":
        from chunkwise.benchmarks.narrativeqa.loader import load_narrativeqa

        examples, source = load_narrativeqa(
            _narrativeqa_source(spec), limit=limit, revision=revision
        )
        return TaskData(task, examples, source, source["total"])
    from chunkwise.benchmarks.infinitebench import loader as ib

    data = "hub" if spec == "hub" else DataSpec("local", path=Path(spec))
    td = ib.load_task(INFINITEBENCH_TASK[task], data, limit=limit, revision=revision)
    examples = []
    for ex in td.examples:
        ex = dict(ex)
        if task == "en_mc":
            text, letter = ex["answer"]
            ex["answer"] = {"letter": letter, "text": text, "options": list(ex["options"])}
        examples.append(ex)
    return TaskData(
        task, examples, {**td.source, "infinitebench_task": INFINITEBENCH_TASK[task]}, td.total
    )


__all__ = ["DISPLAY", "INFINITEBENCH_TASK", "TASKS", "load_task", "parse_data_spec"]
