"""InfiniteBench scoring: one prediction, or a predictions file.

The pieces, one module each: :mod:`.labels` (the tasks and gold answers in their native
types), :mod:`.rules` (the ``official`` and ``lenient`` rules, rule for rule) and
:mod:`.extractors` (``none``, ``parsed`` = the strategy's parsed answer, for our MapReduce
prompts, ``mapreduce`` = LLM×MapReduce's own answer processing, ``answer_field`` = our stricter
one). This module puts them together; everything is re-exported here, so it stays the one
import for scoring.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chunkwise.benchmarks.infinitebench.extractors import (
    EXTRACTORS,
    extract_answer_field,
    extract_mapreduce,
    extract_none,
    extract_parsed,
    reads_raw,
    resolve_extract,
)
from chunkwise.benchmarks.infinitebench.labels import TASKS, check_task, normalize_label
from chunkwise.benchmarks.infinitebench.rules import LENIENT, OFFICIAL, SCORERS, Rule
from chunkwise.errors import BadInput
from chunkwise.io import JSONInputError, parse_json

_check_task = check_task


def _check_scorer(scorer: str) -> dict[str, Rule]:
    rules = SCORERS.get(scorer)
    if rules is None:
        raise BadInput(f"unknown scorer {scorer!r}; valid scorers: {', '.join(SCORERS)}")
    return rules


def _check_extractor(extract: str) -> None:
    if extract != "auto" and extract not in EXTRACTORS:
        raise BadInput(
            f"unknown extractor {extract!r}; valid extractors: auto, {', '.join(EXTRACTORS)}"
        )


def score_one(
    task: str,
    prediction: str,
    label: Any,
    scorer: str = "official",
    *,
    model_name: str | None = None,
    options: list[str] | None = None,
) -> float:
    """Score one prediction in [0, 1]. ``model_name="gpt4"`` turns on math_calc's drop of the
    first number (the official scorer does that for GPT-4 only)."""
    rules = _check_scorer(scorer)
    gold = normalize_label(task, label, options)
    if not isinstance(prediction, str):
        raise BadInput(f"prediction must be a string, got {type(prediction).__name__}")
    return float(rules[task](prediction, gold, model_name))


def _read_lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        with path.open(encoding="utf-8-sig") as f:  # tolerate a byte order mark
            yield from enumerate(f, start=1)
    except FileNotFoundError:
        raise BadInput(f"{path}: no such file") from None
    except IsADirectoryError:
        raise BadInput(f"{path}: is a folder, expected a JSONL predictions file") from None
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 text ({e.reason})") from None


def _field(record: dict, names: tuple[str, ...]) -> Any:
    for name in names:
        if name in record:
            return record[name]
    raise KeyError(" or ".join(repr(n) for n in names))


def score_predictions_file(
    task: str,
    path: str | Path,
    scorer: str = "official",
    extract: str = "none",
    skip_bad_lines: bool = False,
    *,
    model_name: str | None = None,
) -> dict[str, Any]:
    """Score a predictions JSONL file (lines ``{"id", "prediction"|"pred",
    "ground_truth"|"label"[, "options"]}``; blank lines are ignored).

    An extractor that reads raw output (``mapreduce``, ``answer_field``) takes a chunkwise
    prediction line's ``raw_output`` when it has one (the released LLM×MapReduce files hold
    the raw reduce text in ``prediction``). ``auto`` resolves line by line from the line's
    ``strategy`` (:func:`~chunkwise.benchmarks.infinitebench.extractors.resolve_extract`): a chunkwise run's file
    then scores as its results.json does, and a line that names no strategy is taken as is.

    Returns ``{"task", "scorer", "score" (percent), "n", "skipped"}``. A malformed line raises
    :class:`BadInput` naming ``file:line`` unless ``skip_bad_lines``, which counts it instead.
    """
    _check_task(task)
    rules = _check_scorer(scorer)
    _check_extractor(extract)
    path = Path(path)
    total = 0.0
    n = 0
    skipped = 0
    for lineno, line in _read_lines(path):
        if not line.strip():
            continue
        try:
            record = _parse_line(line)
        except BadInput as e:
            if skip_bad_lines:
                skipped += 1
                continue
            raise _line_error(path, lineno, None, e) from None
        name = resolve_extract(extract, _strategy(record))
        try:
            pred, gold = _prediction_and_gold(task, record, raw=reads_raw(name))
            total += float(rules[task](EXTRACTORS[name](task, pred), gold, model_name))
        except BadInput as e:
            if skip_bad_lines:
                skipped += 1
                continue
            raise _line_error(path, lineno, record.get("id"), e) from None
        n += 1
    if n == 0:
        extra = f" ({skipped} bad lines skipped)" if skipped else ""
        raise BadInput(f"{path}: no scorable predictions{extra}")
    return {"task": task, "scorer": scorer, "score": 100.0 * total / n, "n": n, "skipped": skipped}


def _parse_line(line: str) -> dict[str, Any]:
    try:
        record = parse_json(line)
    except JSONInputError as e:  # syntax, depth, NaN: never a RecursionError
        raise BadInput(f"not valid JSON ({e})") from None
    if not isinstance(record, dict):
        raise BadInput("expected a JSON object")
    return record


def _strategy(record: dict[str, Any]) -> str | None:
    """The strategy a chunkwise prediction line names (None for other files)."""
    value = record.get("strategy")
    return value if isinstance(value, str) else None


def _prediction_and_gold(task: str, record: dict[str, Any], raw: bool = False) -> tuple[str, Any]:
    """The text to extract from (a chunkwise line's ``raw_output`` when the extractor reads
    raw output and the line has one) and the normalised gold answer."""
    try:
        pred = _field(record, ("prediction", "pred"))
        if raw and isinstance(record.get("raw_output"), str):
            pred = record["raw_output"]
        label = _field(record, ("ground_truth", "label"))
    except KeyError as e:
        raise BadInput(f"missing field {e.args[0]}") from None
    if isinstance(pred, (int, float)) and not isinstance(pred, bool):
        pred = str(pred)
    if not isinstance(pred, str):
        raise BadInput(f"prediction must be a string, got {type(pred).__name__}")
    options = record.get("options")
    gold = normalize_label(task, label, options if isinstance(options, list) else None)
    return pred, gold


def _line_error(path: Path, lineno: int, rid: Any, err: BadInput) -> BadInput:
    where = f"{path}:{lineno}" + (f" (id {rid})" if rid is not None else "")
    return BadInput(f"{where}: {err} (fix the line, or pass --skip-bad-lines to skip it)")


__all__ = [
    "EXTRACTORS",
    "LENIENT",
    "OFFICIAL",
    "SCORERS",
    "TASKS",
    "extract_answer_field",
    "extract_mapreduce",
    "extract_none",
    "extract_parsed",
    "normalize_label",
    "score_one",
    "score_predictions_file",
]
