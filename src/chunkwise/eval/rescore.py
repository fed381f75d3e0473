"""Rescoring a finished run without loading its model.

Rerunning ``chunkwise eval`` on a run folder in which every example already has a prediction
(e.g. with another ``--scorer`` or ``--extract``) makes no model call, so the model is not
loaded: what a results file says about it (context window, chat, the question wording's prompt
kind, the strategy's window) is taken from a scoring the run already has. The model is loaded
as usual when the run has none yet (it stopped before writing results.json), when a prediction
is missing or failed, and for data that is made with the model's tokenizer (``synthetic:``),
whose ids are not known without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chunkwise.eval.run_dir import main_file, read_records, shard_files
from chunkwise.io import JSONInputError, parse_json

#: what the runner takes from a stored ``model`` block instead of asking the model
_NEEDED = {"spec": str, "prompt_kind": str, "strategy_window": int}


def answered_ids(out: Path, task: str) -> set[Any]:
    """Ids of ``task`` with a prediction that did not fail (main file and rank shards)."""
    done: set[Any] = set()
    for path in [main_file(out, task), *shard_files(out, task)]:
        done.update(r["id"] for r in read_records(path) if not r.get("error"))
    return done


def all_answered(out: Path, ids: dict[str, list[Any]]) -> bool:
    """Whether every id of every task already has a prediction that did not fail."""
    return all(set(want) <= answered_ids(out, task) for task, want in ids.items())


def stored_model_info(out: Path, spec: str) -> dict[str, Any] | None:
    """The ``model`` block of a results file in ``out`` made for model ``spec`` (as stored:
    credentials masked), or None when there is no readable one."""
    for path in sorted(out.glob("results*.json")):  # results.json first
        try:
            model = parse_json(path.read_bytes()).get("model")
        except (JSONInputError, OSError, AttributeError):
            continue
        if isinstance(model, dict) and model.get("spec") == spec and _complete(model):
            return model
    return None


def _complete(model: dict[str, Any]) -> bool:
    return all(
        isinstance(model.get(k), t) and not isinstance(model.get(k), bool)
        for k, t in _NEEDED.items()
    )


def rescore_model_info(out: Path, spec: str, ids: dict[str, list[Any]]) -> dict[str, Any] | None:
    """The stored model block when scoring this run needs no model call (every example of
    every task answered) and an earlier scoring recorded it; else None (load the model)."""
    if not ids or not all_answered(out, ids):
        return None
    return stored_model_info(out, spec)


__all__ = ["all_answered", "answered_ids", "rescore_model_info", "stored_model_info"]
