"""One bench cell on the harness: a strategy answers a chosen list of examples through
:func:`~chunkwise.eval.runner.run_eval`, into a run folder of its own.

A bench script picks its documents (needles away from the edges that truncation keeps, one
long document, ...); :func:`write_examples` stores them as the benchmark's local data folder
and :func:`run_cell` hands the rest to the runner, so a cell's predictions, per-example scores
(``samples/``) and results.json are an ordinary ``chunkwise eval`` run's, resumable the same
way. :func:`cell_summary` reads a finished cell back as the numbers a bench table shows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from chunkwise.eval.config import EvalConfig
from chunkwise.io import atomic_write_text, read_json, read_jsonl
from chunkwise.stats import wilson_interval


def model_folder(root: Path, spec: str) -> Path:
    """Where a bench keeps one model's cells under ``root``: the spec as a folder name."""
    return Path(root) / (re.sub(r"[^\w.=-]+", "_", spec).strip("_") or "model")


def write_examples(folder: Path, task: str, examples: list[dict[str, Any]]) -> Path:
    """``folder/<task>.jsonl`` with ``examples`` (the benchmark's records: ``{id, context,
    input, answer, options}`` and what else its loader reads), unless it is there already: a
    resumed bench answers the documents it started on."""
    path = Path(folder) / f"{task}.jsonl"
    if not path.is_file():
        lines = [json.dumps(ex, ensure_ascii=False) + "\n" for ex in examples]
        atomic_write_text(path, "".join(lines))
    return path


def finished(out: Path) -> bool:
    """Whether the cell's run folder holds its results."""
    return (Path(out) / "results.json").is_file()


def run_cell(
    *,
    model: str,
    benchmark: str,
    task: str,
    data: Path,
    out: Path,
    strategy: str,
    strategy_args: dict[str, Any] | None = None,
    window: int | None = None,
    llm: Any = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Answer and score every example of ``data/<task>.jsonl`` with ``strategy`` (capped at
    ``window`` tokens; None: the model's own) into the run folder ``out``, and summarize it;
    a finished ``out`` is only read. ``llm``: the loaded ``model`` (loaded here when None and
    the cell is not finished)."""
    from chunkwise.eval.runner import run_eval

    if finished(out):
        return cell_summary(out, task)
    cfg = EvalConfig(
        model=model,
        strategy=strategy,
        strategy_args=dict(strategy_args or {}),
        benchmark=benchmark,
        tasks=[task],
        data=str(data),
        context_window=window,
        seed=seed,
        output=str(out),
        save_trace=False,
        log_samples=True,
    )
    run_eval(cfg, llm=llm, progress=False)
    return cell_summary(out, task)


def cell_summary(out: Path, task: str) -> dict[str, Any]:
    """A finished cell: accuracy (percent) with n and its 95% interval (Wilson for 0/1
    scores, else results.json's bootstrap), per-example scores, wall seconds (the strategy's,
    summed over examples), calls and tokens, and the run folder."""
    out = Path(out)
    results = read_json(out / "results.json", "results file")
    block = results["results"][task]
    stats = results["strategy_stats"][task]
    samples = out / (results["files"]["samples"] or "samples") / f"{task}.jsonl"
    scores = [float(rec["score"]) for _, rec in read_jsonl(samples)]
    binary = all(s in (0.0, 1.0) for s in scores)
    correct = int(sum(scores))
    lo, hi = wilson_interval(correct, len(scores)) if binary else block["score_ci95"]
    return {
        "strategy": results["strategy"]["name"],
        "window": results["model"]["strategy_window"],
        "accuracy": round(block["score"], 2),
        "n": block["n"],
        "correct": correct if binary else None,
        "ci95": [round(lo, 2), round(hi, 2)],
        "interval": "wilson" if binary else "bootstrap",
        "errors": block["errors"],
        "scores": scores,
        "wall_s": round(stats["seconds"], 3),
        "llm_calls": stats["llm_calls"],
        "prompt_tokens": stats["prompt_tokens"],
        "completion_tokens": stats["completion_tokens"],
        "run_dir": str(out),
    }


def predictions(out: Path, task: str) -> list[dict[str, Any]]:
    """The cell's prediction lines, in data order (``id``, ``prediction``, ``stats``, ...)."""
    return [rec for _, rec in read_jsonl(Path(out) / "predictions" / f"{task}.jsonl")]


__all__ = [
    "cell_summary",
    "finished",
    "model_folder",
    "predictions",
    "run_cell",
    "write_examples",
]
