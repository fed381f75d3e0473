"""Pyramid-Align records as a benchmark: score a model on synthesized questions it never saw.

``--benchmark pyramid_align --tasks qa --data PATH`` where PATH is a JSONL file of records, a
folder of ``*.jsonl`` or a finished ``chunkwise synth`` folder (its ``data/`` shards). Each record
becomes ``{id, context: document, input: question, answer: [answer]}``. The reference answers
are the synthesis teacher's MapReduce answers, so the score measures agreement with that
teacher (ROUGE-L F1 by default; ``exact_match`` as the option), not human-judged correctness.

The demo holds whole documents out of training and evaluates on their questions this way.
Importing this module registers the benchmark.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chunkwise.data.checks import UniqueIds, bad, need_id, need_str
from chunkwise.errors import BadInput
from chunkwise.eval.benchmarks import Benchmark, register_benchmark

TASKS = ("qa",)
PROMPT_VERSION = "pyramid-align-qa-1"


def parse_data_spec(data: str) -> list[Path]:
    """The JSONL files behind ``--data``; an error names what was expected."""
    path = Path((data or "").strip()).expanduser()
    if path.is_file():
        return [path]
    if path.is_dir():
        inner = path / "data" if (path / "data").is_dir() else path
        files = sorted(inner.glob("*.jsonl"))
        if files:
            return files
    raise BadInput(
        f"--data {data!r}: expected a JSONL file of Pyramid-Align records, a folder of *.jsonl, "
        "or a `chunkwise synth` output folder"
    )


def to_example(rec: dict[str, Any], where: str, fallback_id: str) -> dict[str, Any]:
    """One Pyramid-Align record as an example; a malformed one is a BadInput naming
    ``where`` (``file:line``) and the field."""
    fields = {}
    for key in ("document", "question", "answer"):
        fields[key] = need_str(rec, key, where)
        if not fields[key].strip():
            raise bad(where, repr(key), "is empty")
    rid = need_id(rec, "id", where, required=False)
    source_id = need_id(rec, "source_id", where, required=False)
    return {
        "id": rid if rid is not None else fallback_id,
        "context": fields["document"],
        "input": fields["question"],
        "answer": [fields["answer"]],
        "options": [],
        "source_id": source_id,
    }


def load_task(
    task: str,
    files: list[Path],
    *,
    limit: int | None = None,
    revision: str | None = None,
    seed: int = 0,
    count_tokens: Any = None,
):
    """Every record of ``files`` as an example, all checked before any is returned: a line
    that is not a record with a document, question and answer (strings), or whose id repeats
    an earlier one, is a BadInput naming ``file:line``."""
    from chunkwise.data.longqa import TaskData
    from chunkwise.io import read_jsonl

    if task not in TASKS:
        raise BadInput(f"unknown pyramid_align task {task!r}; valid: {', '.join(TASKS)}")
    examples: list[dict[str, Any]] = []
    ids = UniqueIds()
    for f in files:
        for line, rec in read_jsonl(f):
            where = f"{f}:{line}"
            examples.append(to_example(rec, where, f"{f.stem}-{len(examples)}"))
            ids.add(examples[-1]["id"], where)
    if not examples:
        raise BadInput(
            f"no Pyramid-Align records in {', '.join(str(f) for f in files)} (the files are empty)"
        )
    total = len(examples)
    if limit is not None:
        examples = examples[:limit]
    source = {"files": [str(f) for f in files], "total": total}
    return TaskData(task, examples, source, total)


def _build_query(task: str, example: dict[str, Any], kind: str = "chat", window: int | None = None):
    from chunkwise.eval.longqa_benchmarks import build_query

    return build_query("narrativeqa", example, kind, window)  # the same open-question wording


def _score(task: str, prediction: str, ground_truth: Any, scorer: str, extract: str) -> float:
    from chunkwise.eval.longqa_benchmarks import score

    return score("narrativeqa", prediction, ground_truth, scorer)


def _pyramid_align() -> Benchmark:
    from chunkwise.eval.longqa_benchmarks import SCORERS

    return Benchmark(
        name="pyramid_align",
        tasks=TASKS,
        parse_data=parse_data_spec,
        load=load_task,
        build_query=_build_query,
        score=_score,
        scorers=SCORERS,
        extractors=("none",),
        prompt_version=lambda: PROMPT_VERSION,
        display={"qa": "held-out Pyramid-Align QA"},
        default_data="",
    )


register_benchmark("pyramid_align", _pyramid_align)

__all__ = ["TASKS", "load_task", "parse_data_spec", "to_example"]
