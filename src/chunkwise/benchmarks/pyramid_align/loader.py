"""Pyramid-Align's loader: each record of a JSONL file, a folder of ``*.jsonl`` or a finished
``chunkwise synth`` folder (its ``data/`` shards) as ``{id, context: document, input: question,
answer: [answer]}``, every record checked first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chunkwise.benchmarks.checks import UniqueIds, bad, need_id, need_str
from chunkwise.benchmarks.types import TaskData
from chunkwise.errors import BadInput

TASKS = ("qa",)


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
) -> TaskData:
    """Every record of ``files`` as an example, all checked before any is returned: a line
    that is not a record with a document, question and answer (strings), or whose id repeats
    an earlier one, is a BadInput naming ``file:line``."""
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


__all__ = ["TASKS", "load_task", "parse_data_spec", "to_example"]
