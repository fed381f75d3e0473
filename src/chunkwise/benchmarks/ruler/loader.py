"""RULER's loader: ``synthetic:LENGTH`` examples from :mod:`chunkwise.data.ruler`, or a folder
of JSONL files ``chunkwise generate-data --task ruler_<task>`` wrote (``<task>.jsonl`` or
``ruler_<task>.jsonl``), every record checked before it is used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chunkwise.benchmarks.checks import UniqueIds, need_id, need_str, wrong_type
from chunkwise.benchmarks.data_spec import DataSpec, parse_data
from chunkwise.benchmarks.evidence import check_spans
from chunkwise.benchmarks.types import TaskData
from chunkwise.errors import BadInput

DEFAULT_N = 20


def parse_data_spec(data: str) -> DataSpec:
    """``synthetic:LENGTH`` (``4096``, ``4k``, ``128K``, ``1m``) or a folder of JSONL files."""
    text = (data or "").strip()
    if text == "hub":
        raise BadInput(
            "--data hub: ruler data is generated, not downloaded; pass --data synthetic:LENGTH "
            "(e.g. synthetic:4096) or a folder written by chunkwise generate-data"
        )
    spec = parse_data(data)
    if spec is None:
        raise BadInput(
            f"--data {data!r} is neither 'synthetic:LENGTH' nor an existing folder of "
            "<task>.jsonl files (write them with chunkwise generate-data --task ruler_<task>)"
        )
    return spec


def _check_meta(task: str, meta: dict[str, Any], where: str) -> None:
    """The fields :func:`.questions.build_query` renders the question from
    (:mod:`chunkwise.data.ruler`)."""
    from chunkwise.data import ruler

    forms = ruler.templates()["kinds"][ruler.TASKS[task].kind]["chat"]
    form = meta.get("form", "one")
    if not isinstance(form, str) or form not in forms:
        raise wrong_type(where, "'meta.form'", f"one of {', '.join(map(repr, forms))}", form)
    for key in ("query", "kind", "kind_one"):
        need_str(meta, key, where, required=False, prefix="meta.")
    count = meta.get("count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, (int, str))):
        raise wrong_type(where, "'meta.count'", "an integer", count)


def _check_record(rec: Any, where: str, task: str | None = None) -> dict[str, Any]:
    if not isinstance(rec, dict):
        raise BadInput(f"{where}: a record must be a JSON object")
    missing = [k for k in ("id", "context", "answer") if k not in rec]
    if missing:
        raise BadInput(f"{where}: record has no {', '.join(repr(k) for k in missing)} field")
    rid = need_id(rec, "id", where)
    if not isinstance(rec["context"], str):
        raise BadInput(f"{where}: id {rid}: context must be a string")
    answer = rec["answer"]
    if isinstance(answer, str):
        answer = [answer]
    if not isinstance(answer, list) or not all(isinstance(a, str) for a in answer):
        raise BadInput(f"{where}: id {rid}: answer must be a non-empty list of strings")
    if not any(answer):  # scoring needs one non-empty expected answer
        raise BadInput(f"{where}: id {rid}: answer holds no non-empty string")
    meta = rec.get("meta") or {}
    if not isinstance(meta, dict):
        raise BadInput(f"{where}: id {rid}: meta must be an object")
    if meta and task is not None:
        _check_meta(task, meta, where)
    question = rec.get("input") or ""
    if not isinstance(question, str):
        raise BadInput(f"{where}: id {rid}: input must be a string")
    out = {
        "id": rid,
        "context": rec["context"],
        "input": question,
        "answer": answer,
        "options": [],
        "meta": meta,
    }
    if rec.get("evidence") is not None:  # spans the generator recorded
        out["evidence"] = check_spans(rec["evidence"], f"{where}: id {rid}", len(rec["context"]))
    return out


def _from_folder(task: str, folder: Path) -> tuple[list[dict[str, Any]], Path]:
    from chunkwise.io import read_jsonl

    for name in (f"{task}.jsonl", f"ruler_{task}.jsonl"):
        path = folder / name
        if path.is_file():
            ids, recs = UniqueIds(), []
            for line, r in read_jsonl(path):
                recs.append(_check_record(r, f"{path}:{line}", task))
                ids.add(recs[-1]["id"], f"{path}:{line}")
            return recs, path
    present = sorted(p.name for p in folder.glob("*.jsonl"))
    raise BadInput(
        f"{folder} has no {task}.jsonl (nor ruler_{task}.jsonl); it has: "
        f"{', '.join(present) or 'no .jsonl files'}"
    )


def load_task(
    task: str,
    data: str | DataSpec,
    *,
    limit: int | None = None,
    revision: str | None = None,
    seed: int = 0,
    count_tokens: Any = None,
) -> TaskData:
    """The examples of one task (see the module docstring)."""
    from chunkwise.data import ruler

    if task not in ruler.TASKS:
        raise BadInput(f"unknown ruler task {task!r}; valid tasks: {', '.join(ruler.TASKS)}")
    spec = parse_data_spec(data) if isinstance(data, str) else data
    if limit is not None and limit < 1:
        raise BadInput(f"limit must be at least 1, got {limit}")
    if spec.kind == "local":
        assert spec.path is not None
        examples, path = _from_folder(task, spec.path)
        source: dict[str, Any] = {"source": "local", "path": str(path.resolve())}
    else:
        if count_tokens is None:
            raise BadInput("synthetic data needs the model's tokenizer (count_tokens)")
        assert spec.length is not None
        n = limit or DEFAULT_N
        raw = ruler.generate(
            task, length_tokens=spec.length, n=n, seed=seed, count_tokens=count_tokens
        )
        examples = [_check_record(r, f"synthetic {task}") for r in raw]
        tokens = [r["meta"]["tokens"] for r in raw]
        source = {
            "source": "synthetic",
            "generator": "chunkwise.data.ruler",
            "version": ruler.prompt_version(),
            "length": spec.length,
            "seed": seed,
            "n": n,
            "context_tokens": {"min": min(tokens), "max": max(tokens)},
        }
    seen: set[Any] = set()
    dupes = [ex["id"] for ex in examples if ex["id"] in seen or seen.add(ex["id"])]
    if dupes:
        raise BadInput(f"{task} ({source.get('path', 'synthetic')}): duplicate ids {dupes[:10]}")
    total = len(examples)
    if limit is not None:
        examples = examples[:limit]
    return TaskData(task, examples, source, total)


def available_tasks(spec: DataSpec) -> list[str]:
    """Every task for synthetic data; for a folder, the tasks it has a file for."""
    from chunkwise.data import ruler

    if spec.kind != "local":
        return list(ruler.TASKS)
    assert spec.path is not None
    have = {p.name for p in spec.path.glob("*.jsonl")}
    found = [t for t in ruler.TASKS if f"{t}.jsonl" in have or f"ruler_{t}.jsonl" in have]
    if not found:
        raise BadInput(f"{spec.path} holds no <task>.jsonl file of a ruler task")
    return found


__all__ = ["DEFAULT_N", "available_tasks", "load_task", "parse_data_spec"]
