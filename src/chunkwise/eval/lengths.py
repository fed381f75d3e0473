"""Effective context length: ``chunkwise eval --lengths 4K,8K,16K``.

The same tasks, strategy and model run at each length (the ``--data`` source with its length
replaced: ``synthetic:LENGTH`` for ruler and infinitebench, ``heldout:LENGTH`` /
``train:LENGTH`` for generated), each into ``OUTPUT/len-<tokens>/`` through the sweep driver
(:mod:`.sweep`: a finished length is skipped on a rerun, an unfinished one resumes). Then
``OUTPUT/lengths.json`` and ``OUTPUT/lengths.png`` hold each task's score and the task average
against length with their 95% intervals (:mod:`.curves`), and the effective length.

Effective length, as RULER defines it: the longest length up to which the score stays above a
threshold, strictly, at every length tested from the shortest on (a length after the first
one at or below the threshold never counts, however it scores). RULER's threshold is
Llama-2-7B's score at 4K, 85.6 (:data:`RULER_THRESHOLD`); ``--effective-threshold`` adds
one of your own. When the shortest length already fails, the effective length is None
(``below_shortest``); when every length passes, it is the longest one tested and
``beyond_longest`` says the true one may be longer (RULER's ">128K").
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.eval.config import EvalConfig
from chunkwise.eval.curves import AVERAGE, curves, plot_curves
from chunkwise.eval.sweep import SweepPoint, point_config, run_sweep

#: RULER's threshold: Llama-2-7B's average score at 4K (RULER, Hsieh et al. 2024, Table 3)
RULER_THRESHOLD = 85.6
_LENGTH = re.compile(r"(\d+)\s*([kKmM]?)")
_SOURCE = re.compile(r"([A-Za-z_-]+):\s*\S+")
LENGTH_SOURCES = (
    "synthetic:LENGTH (ruler, infinitebench) or heldout:LENGTH / heldout-templates:LENGTH / "
    "train:LENGTH (generated)"
)


def parse_lengths(items: Sequence[str]) -> list[int]:
    """``["4K", "8k", "16384"]`` (also one comma-separated text) as token counts (K = 1024,
    M = 1024 * 1024), sorted, each once."""
    out: set[int] = set()
    for item in items:
        for part in str(item).split(","):
            text = part.strip()
            if not text:
                continue
            m = _LENGTH.fullmatch(text)
            if not m or int(m.group(1)) == 0:
                raise BadInput(
                    f"--lengths: {text!r} is not a length in tokens; give e.g. 4K,8K,16K "
                    "(K = 1024 tokens) or 4096,8192"
                )
            out.add(int(m.group(1)) * {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()])
    if not out:
        raise BadInput("--lengths: no length given; e.g. --lengths 4K,8K,16K")
    return sorted(out)


def length_label(tokens: int) -> str:
    """4096 -> 4K, 1048576 -> 1M, 5000 -> 5000."""
    for unit, size in (("M", 1024 * 1024), ("K", 1024)):
        if tokens % size == 0:
            return f"{tokens // size}{unit}"
    return str(tokens)


def data_at_length(cfg: EvalConfig, length: int) -> str:
    """``cfg.data`` with its length replaced by ``length``; refused (one line) for a source
    that has no length, e.g. the Hub or a folder of official files."""
    from chunkwise.benchmarks import get_benchmark

    bench = get_benchmark(cfg.benchmark)
    data = cfg.data.strip()
    m = _SOURCE.fullmatch(data)
    spec = bench.parse_data(data)
    if m is None or not isinstance(getattr(spec, "length", None), int):
        raise BadInput(
            f"--lengths: --data {data!r} has no length to vary; use a generated source: "
            f"{LENGTH_SOURCES}"
        )
    text = f"{m.group(1)}:{length}"
    if getattr(bench.parse_data(text), "length", None) != length:  # pragma: no cover
        raise BadInput(f"--lengths: --data {text!r} does not read as length {length}")
    return text


def length_points(cfg: EvalConfig) -> list[SweepPoint]:
    """One sweep point per length of ``cfg.lengths``: ``OUTPUT/len-<tokens>``."""
    return [
        SweepPoint(
            f"len-{n}", n, point_config(cfg, cfg.output, f"len-{n}", data=data_at_length(cfg, n))
        )
        for n in parse_lengths(cfg.lengths)
    ]


def effective_length(curve: Sequence[dict[str, Any]], threshold: float) -> dict[str, Any]:
    """The longest length of ``curve`` (points with ``length`` and ``score``) up to which
    every score, from the shortest length on, is above ``threshold``."""
    best, passed = None, 0
    points = sorted(curve, key=lambda p: p["length"])
    for p in points:
        score = p.get("score")
        if score is None or not math.isfinite(score) or score <= threshold:
            break
        best, passed = p["length"], passed + 1
    return {
        "threshold": threshold,
        "length": best,
        "below_shortest": bool(points) and best is None,
        "beyond_longest": bool(points) and passed == len(points),
    }


def thresholds_of(cfg: EvalConfig) -> dict[str, float]:
    out = {"ruler": RULER_THRESHOLD}
    if cfg.effective_threshold is not None:
        value = float(cfg.effective_threshold)
        if not math.isfinite(value):
            raise BadInput(f"--effective-threshold {value}: give a score in percent, e.g. 50")
        out["user"] = value
    return out


def lengths_report(
    cfg: EvalConfig, points: Sequence[SweepPoint], results: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """lengths.json's content: curves per task and average, effective lengths, the runs."""
    lines = curves([p.x for p in points], results, x_name="length")
    thresholds = thresholds_of(cfg)
    return {
        "benchmark": cfg.benchmark,
        "strategy": cfg.strategy,
        "model": results[0].get("model", {}).get("spec", cfg.model) if results else cfg.model,
        "data": cfg.data,
        "tasks": [t for t in lines if t != AVERAGE],
        "lengths": [int(p.x) for p in points],
        "runs": {str(int(p.x)): p.cfg.output for p in points},
        "thresholds": thresholds,
        "curves": {cfg.strategy: lines},
        "effective_length": {
            cfg.strategy: {
                task: {name: effective_length(line, t) for name, t in thresholds.items()}
                for task, line in lines.items()
            }
        },
    }


def run_lengths(cfg: EvalConfig, *, progress: bool = True, llm: Any = None) -> dict[str, Any]:
    """Run the sweep, write ``OUTPUT/lengths.json`` and ``OUTPUT/lengths.png``; returns the
    JSON's content."""
    from chunkwise.io import atomic_write_json

    points = length_points(cfg.resolved())
    results = run_sweep(points, progress=progress, llm=llm)
    report = lengths_report(cfg.resolved(), points, results)
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    report["files"] = {"json": "lengths.json", "png": "lengths.png"}
    atomic_write_json(out / "lengths.json", report)
    lines = report["curves"][cfg.strategy]
    series = {
        f"{cfg.strategy} · {task}": line
        for task, line in lines.items()
        if task != AVERAGE or len(lines) > 2  # one task: its average is the same line
    }
    plot_curves(
        out / "lengths.png",
        series,
        x_name="length",
        xlabel="context length (tokens)",
        title=f"{cfg.benchmark}: score against length ({cfg.strategy}, {report['model']})",
        thresholds={f"{k} {v:g}": v for k, v in report["thresholds"].items()},
        log2_x=True,
        xticks={p.x: length_label(int(p.x)) for p in points},
    )
    return report


__all__ = [
    "RULER_THRESHOLD",
    "data_at_length",
    "effective_length",
    "length_label",
    "length_points",
    "lengths_report",
    "parse_lengths",
    "run_lengths",
]
