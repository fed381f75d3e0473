"""RULER-style synthetic tasks as the registered ``ruler`` benchmark.

Tasks (RULER's names; what each hides and asks: :mod:`chunkwise.data.ruler`):
``niah_single_1``/``_2``/``_3``, ``niah_multikey_1``/``_2``/``_3``, ``niah_multivalue``,
``niah_multiquery``, ``vt``, ``cwe``, ``fwe``; ``--tasks all``: every task (for a folder,
every task it has a file for).

``--data``: ``synthetic:LENGTH`` (``4096``, ``32k``, ``128K``, ``1m``: contexts of LENGTH tokens
of the reading model's tokenizer, ``--limit`` examples, default 20, from ``--seed``), or a
folder of JSONL files written by ``chunkwise generate-data --task ruler_<task>``, named
``<task>.jsonl`` or ``ruler_<task>.jsonl``.

Scorers (``--scorer``), on the prediction stripped and with control characters turned into
newlines as RULER's ``postprocess_pred`` does, case-insensitive substring match:

* ``all`` — RULER's ``string_match_all``: the fraction of expected strings present;
* ``part`` — RULER's ``string_match_part``: 1 when any expected string is present;
* ``official`` — RULER's metric for the task: ``all`` for every synthetic task (RULER keeps
  ``part`` for its QA tasks).

Questions come from ``prompts/ruler.yaml``: chat models get an instruction, base models a
question and the answer's opening words to continue (RULER's ``answer_prefix``), with
RULER's output budget per task kind. Importing this module registers the benchmark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunkwise.data.checks import UniqueIds, need_id, need_str, wrong_type
from chunkwise.data.infinitebench import synthetic_length
from chunkwise.errors import BadInput
from chunkwise.eval.benchmarks import Benchmark, register_benchmark

SCORERS = ("official", "all", "part")
DEFAULT_N = 20
_CONTROL = re.compile(r"[\x00-\x1f]")

DISPLAY = {
    "niah_single_1": "NIAH single 1",
    "niah_single_2": "NIAH single 2",
    "niah_single_3": "NIAH single 3",
    "niah_multikey_1": "NIAH multikey 1",
    "niah_multikey_2": "NIAH multikey 2",
    "niah_multikey_3": "NIAH multikey 3",
    "niah_multivalue": "NIAH multivalue",
    "niah_multiquery": "NIAH multiquery",
    "vt": "Variable tracking",
    "cwe": "Common words",
    "fwe": "Frequent words",
}


# --------------------------------------------------------------------------------------------
# scoring


def postprocess(prediction: Any) -> str:
    """RULER's ``postprocess_pred``: strip, control characters -> newline, strip."""
    text = prediction if isinstance(prediction, str) else ""
    return _CONTROL.sub("\n", text.strip()).strip()


def _references(ground_truth: Any) -> list[str]:
    refs = ground_truth if isinstance(ground_truth, list) else [ground_truth]
    refs = [str(r) for r in refs if r is not None and str(r) != ""]
    if not refs:
        raise BadInput(f"no expected answers in {ground_truth!r}")
    return refs


def string_match_all(prediction: Any, ground_truth: Any) -> float:
    """Fraction of the expected strings found in the prediction (case-insensitive)."""
    pred = postprocess(prediction).lower()
    refs = _references(ground_truth)
    return sum(r.lower() in pred for r in refs) / len(refs)


def string_match_part(prediction: Any, ground_truth: Any) -> float:
    """1.0 when any expected string is found in the prediction (case-insensitive)."""
    pred = postprocess(prediction).lower()
    return float(any(r.lower() in pred for r in _references(ground_truth)))


METRICS = {"all": string_match_all, "part": string_match_part}
#: RULER scores every synthetic task with ``string_match_all`` (its QA tasks, which need
#: downloaded datasets and are not built here, with ``string_match_part``):
#: scripts/eval/synthetic/constants.py
OFFICIAL_METRIC = "all"


def score(task: str, prediction: Any, ground_truth: Any, scorer: str = "official") -> float:
    """One prediction's score in [0, 1]."""
    if scorer not in SCORERS:
        raise BadInput(f"unknown scorer {scorer!r}; valid scorers: {', '.join(SCORERS)}")
    metric = OFFICIAL_METRIC if scorer == "official" else scorer
    return METRICS[metric](prediction, ground_truth)


# --------------------------------------------------------------------------------------------
# data


@dataclass(frozen=True)
class RulerData:
    """A parsed ``--data`` value: ``synthetic`` with a length, or a ``local`` folder."""

    kind: str
    length: int | None = None
    path: Path | None = None

    @property
    def needs_tokenizer(self) -> bool:
        return self.kind == "synthetic"


@dataclass
class TaskData:
    task: str
    examples: list[dict[str, Any]]
    source: dict[str, Any] = field(default_factory=dict)
    total: int = 0


def parse_data_spec(data: str) -> RulerData:
    """``synthetic:LENGTH`` (``4096``, ``4k``, ``128K``, ``1m``) or a folder of JSONL files."""
    text = (data or "").strip()
    if text == "hub":
        raise BadInput(
            "--data hub: ruler data is generated, not downloaded; pass --data synthetic:LENGTH "
            "(e.g. synthetic:4096) or a folder written by chunkwise generate-data"
        )
    if text.startswith("synthetic:"):
        return RulerData("synthetic", length=synthetic_length(data))
    path = Path(text).expanduser()
    if text and path.is_dir():
        return RulerData("local", path=path)
    raise BadInput(
        f"--data {data!r} is neither 'synthetic:LENGTH' nor an existing folder of <task>.jsonl "
        "files (write them with chunkwise generate-data --task ruler_<task>)"
    )


def _check_meta(task: str, meta: dict[str, Any], where: str) -> None:
    """The fields :func:`build_query` renders the question from (see ``data/ruler.py``)."""
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
    return {
        "id": rid,
        "context": rec["context"],
        "input": question,
        "answer": answer,
        "options": [],
        "meta": meta,
    }


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
    data: str | RulerData,
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


# --------------------------------------------------------------------------------------------
# questions


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
    if kind not in ("chat", "base"):
        raise BadInput(f"prompt kind must be chat or base, got {kind!r}")
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


def _score(task: str, prediction: str, ground_truth: Any, scorer: str, extract: str) -> float:
    return score(task, prediction, ground_truth, scorer)


def available_tasks(spec: RulerData) -> list[str]:
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


def _ruler() -> Benchmark:
    from chunkwise.data import ruler

    return Benchmark(
        name="ruler",
        tasks=tuple(ruler.TASKS),
        parse_data=parse_data_spec,
        load=load_task,
        build_query=build_query,
        score=_score,
        scorers=SCORERS,
        extractors=("none",),
        prompt_version=ruler.prompt_version,
        display=dict(DISPLAY),
        default_data="synthetic:4096",
        available_tasks=available_tasks,
        task_config=task_config,
    )


register_benchmark("ruler", _ruler)

__all__ = [
    "DEFAULT_N",
    "SCORERS",
    "answer_budget",
    "build_query",
    "load_task",
    "parse_data_spec",
    "postprocess",
    "score",
    "string_match_all",
    "string_match_part",
]
