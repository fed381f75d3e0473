"""InfiniteBench's loader: the 12 tasks as benchmark examples.

Three sources, one record shape ``{id, context, input, answer, options}``:

* ``hub`` — ``xinrongzhang2022/InfiniteBench`` on the Hugging Face Hub at a pinned revision,
  one task file at a time, read with explicit :data:`FEATURES` (without them ``datasets``
  fails on ``kv_retrieval.jsonl``, which has no ``options``). That cast turns every answer into
  ``list[str]``, so :func:`restore_answer` brings each back to its task's native type before
  anything is scored.
* a local folder holding the official files, ``<folder>/<task>.jsonl``.
* ``synthetic:LENGTH`` — :mod:`chunkwise.data.synthetic` at LENGTH tokens of the model's
  tokenizer (passkey, number_string, kv_retrieval, math_find, code_run).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from chunkwise.benchmarks.checks import UniqueIds, need_id
from chunkwise.benchmarks.data_spec import DataSpec, parse_data
from chunkwise.benchmarks.infinitebench.labels import TASKS, normalize_label
from chunkwise.benchmarks.types import TaskData
from chunkwise.errors import BadInput

HUB_REPO = "xinrongzhang2022/InfiniteBench"
#: The dataset revision our notes were taken at (the Hub file tree of July 2024, after the
#: kv_retrieval / math_calc / longbook_qa re-uploads). Pass ``revision`` to use another one.
HUB_REVISION = "25cee7d"

#: Every task file read with one schema; ``options`` is absent from some files.
FEATURE_SPEC: dict[str, Any] = {
    "id": "int64",
    "context": "string",
    "input": "string",
    "answer": ["string"],
    "options": ["string"],
}

#: Tasks the synthetic generators can build.
SYNTHETIC_TASKS = ("passkey", "number_string", "kv_retrieval", "math_find", "code_run")
DEFAULT_SYNTHETIC_N = 20

# official display names (README), for tables and plots
DISPLAY_NAMES: dict[str, str] = {
    "passkey": "Retrieve.PassKey",
    "number_string": "Retrieve.Number",
    "kv_retrieval": "Retrieve.KV",
    "longbook_sum_eng": "En.Sum",
    "longbook_qa_eng": "En.QA",
    "longbook_choice_eng": "En.MC",
    "longdialogue_qa_eng": "En.Dia",
    "longbook_qa_chn": "Zh.QA",
    "code_debug": "Code.Debug",
    "code_run": "Code.Run",
    "math_calc": "Math.Calc",
    "math_find": "Math.Find",
}


def features():
    """The ``datasets.Features`` every task file is read with."""
    import datasets
    from datasets import Features, Value

    listof = getattr(datasets, "List", None) or datasets.Sequence  # List since datasets 4
    return Features(
        {
            name: listof(Value(kind[0])) if isinstance(kind, list) else Value(kind)
            for name, kind in FEATURE_SPEC.items()
        }
    )


def check_task(task: str) -> None:
    if task not in TASKS:
        raise BadInput(f"unknown InfiniteBench task {task!r}; valid tasks: {', '.join(TASKS)}")


# --------------------------------------------------------------------------------------------
# records


def restore_answer(task: str, answer: Any, options: list[str] | None = None) -> Any:
    """An answer as the task's official scorer expects it.

    str for passkey / number_string / kv_retrieval; int for code_run; int, or float for a
    median, for math_find; list[int] for math_calc; list[str] for the QA, dialogue and summary
    tasks; ``[option text, letter]`` for longbook_choice_eng and code_debug. Accepts native
    answers (the official files) as well as the ``list[str]`` the Hub cast produces.
    """
    check_task(task)
    return normalize_label(task, answer, options)


def restore_record(task: str, record: dict[str, Any], where: str = "") -> dict[str, Any]:
    """One record in our shape ``{id, context, input, answer, options}`` with a native answer.

    ``where`` (e.g. ``file:line``) is put in front of any error.
    """
    prefix = f"{where}: " if where else ""
    if not isinstance(record, dict):
        raise BadInput(f"{prefix}a record must be a JSON object")
    missing = [k for k in ("id", "context", "answer") if k not in record]
    if missing:
        raise BadInput(f"{prefix}record has no {', '.join(repr(k) for k in missing)} field")
    rid = need_id(record, "id", where or "record")
    options = record.get("options") or []
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise BadInput(f"{prefix}id {rid}: options must be a list of strings")
    context = record["context"]
    if not isinstance(context, str):
        raise BadInput(f"{prefix}id {rid}: context must be a string")
    question = record.get("input") or ""
    if not isinstance(question, str):
        raise BadInput(f"{prefix}id {rid}: input must be a string")
    try:
        answer = restore_answer(task, record["answer"], options)
    except BadInput as e:
        raise BadInput(f"{prefix}id {rid}: {e}") from None
    return {"id": rid, "context": context, "input": question, "answer": answer, "options": options}


# --------------------------------------------------------------------------------------------
# sources


def parse_data_spec(data: str) -> DataSpec:
    """``hub`` | a folder of ``<task>.jsonl`` | ``synthetic:LENGTH`` (``4096``, ``4k``, ``128K``)."""
    spec = parse_data(data)
    if spec is None:
        raise BadInput(
            f"--data {data!r} is neither 'hub', 'synthetic:LENGTH' nor an existing folder of "
            "official <task>.jsonl files"
        )
    return spec


def load_task(
    task: str,
    data: str | DataSpec,
    *,
    limit: int | None = None,
    revision: str | None = None,
    seed: int = 0,
    count_tokens: Callable[[str], int] | None = None,
) -> TaskData:
    """The examples of one task from a source (see the module docstring)."""
    check_task(task)
    spec = parse_data_spec(data) if isinstance(data, str) else data
    if limit is not None and limit < 1:
        raise BadInput(f"limit must be at least 1, got {limit}")
    if spec.kind == "hub":
        examples, source = _from_hub(task, revision or HUB_REVISION, limit)
        total = source.pop("total")
    elif spec.kind == "local":
        assert spec.path is not None
        examples = _from_folder(task, spec.path)
        total = len(examples)
        source = {"source": "local", "path": str(spec.path.resolve() / f"{task}.jsonl")}
    else:
        if task not in SYNTHETIC_TASKS:
            raise BadInput(
                f"no synthetic generator for {task!r}; synthetic data exists for "
                f"{', '.join(SYNTHETIC_TASKS)}"
            )
        if count_tokens is None:
            raise BadInput("synthetic data needs the model's tokenizer (count_tokens)")
        from chunkwise.data.synthetic import generate

        n = limit or DEFAULT_SYNTHETIC_N
        raw = generate(task, length_tokens=spec.length, n=n, seed=seed, count_tokens=count_tokens)
        examples = [restore_record(task, r, f"synthetic {task}") for r in raw]
        total = len(examples)
        source = {"source": "synthetic", "length": spec.length, "seed": seed, "n": n}
    _check_unique_ids(task, examples, source)
    if limit is not None:
        examples = examples[:limit]
    return TaskData(task, examples, source, total)


def _check_unique_ids(task: str, examples: list[dict[str, Any]], source: dict[str, Any]) -> None:
    seen: set[Any] = set()
    dupes = []
    for ex in examples:
        if ex["id"] in seen:
            dupes.append(ex["id"])
        seen.add(ex["id"])
    if dupes:
        where = source.get("path") or source.get("source")
        raise BadInput(f"{task} ({where}): duplicate example ids {dupes[:10]}")


def _from_folder(task: str, folder: Path) -> list[dict[str, Any]]:
    from chunkwise.io import read_jsonl

    path = folder / f"{task}.jsonl"
    if not path.is_file():
        present = sorted(p.stem for p in folder.glob("*.jsonl"))
        raise BadInput(
            f"{path} not found; the folder should hold the official files named <task>.jsonl "
            f"(it has: {', '.join(present) or 'no .jsonl files'})"
        )
    ids = UniqueIds()
    examples = []
    for line, rec in read_jsonl(path):
        ex = restore_record(task, rec, f"{path}:{line}")
        ids.add(ex["id"], f"{path}:{line}")
        examples.append(ex)
    return examples


def _from_hub(task: str, revision: str, limit: int | None) -> tuple[list[dict], dict]:
    """Read one task file from the Hub with explicit features; answers restored."""
    try:
        import datasets
    except ImportError:  # pragma: no cover - a core dependency
        raise BadInput("the 'datasets' package is needed for --data hub") from None
    try:
        ds = datasets.load_dataset(
            HUB_REPO,
            data_files={task: f"{task}.jsonl"},
            split=task,
            revision=revision,
            features=features(),
        )
    except Exception as e:  # network, auth, missing revision: all end the same way for a user
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BadInput(
            f"cannot load {task} from the Hugging Face Hub ({HUB_REPO} at revision {revision}): "
            f"{first}. Without Hub access, download the official files and pass --data "
            f"FOLDER (with {task}.jsonl in it), or use --data synthetic:LENGTH"
        ) from None
    total = len(ds)
    if limit is not None:
        ds = ds.select(range(min(limit, total)))
    examples = [restore_record(task, dict(rec), f"{HUB_REPO}@{revision} {task}") for rec in ds]
    return examples, {"source": "hub", "repo": HUB_REPO, "revision": revision, "total": total}


__all__ = [
    "DEFAULT_SYNTHETIC_N",
    "DISPLAY_NAMES",
    "FEATURE_SPEC",
    "HUB_REPO",
    "HUB_REVISION",
    "SYNTHETIC_TASKS",
    "TASKS",
    "check_task",
    "features",
    "load_task",
    "parse_data_spec",
    "restore_answer",
    "restore_record",
]
