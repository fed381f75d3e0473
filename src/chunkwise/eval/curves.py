"""Score curves of a sweep: each task's score (and the task average) against the points' x
values, with the 95% intervals results.json already holds (the bootstrap of
:mod:`chunkwise.stats` per task; the average's from the tasks' standard errors), as JSON and
as a PNG.

A curve is a list of ``{x_name: x, "score", "ci95": [low, high], "n", "run"}`` in x order;
:func:`curves` makes one per task and one named ``average`` from a sweep's results;
:func:`plot_curves` draws several series (strategies, runs) on one chart.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: the curve of the task average
AVERAGE = "average"


def _number(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def curves(
    xs: Sequence[float], results: Sequence[Mapping[str, Any]], *, x_name: str = "x"
) -> dict[str, list[dict[str, Any]]]:
    """One curve per task (those of the first results, in its order) and ``average`` (the
        task average where a point has every task; with one task, that task's own interval rather
    than results.json's normal one). ``xs[i]`` is where ``results[i]`` sits."""
    if len(xs) != len(results):
        raise ValueError(f"{len(xs)} x values for {len(results)} results")
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    tasks: list[str] = []
    for r in results:
        tasks.extend(t for t in r.get("results", {}) if t not in tasks)
    out: dict[str, list[dict[str, Any]]] = {}
    for task in [*tasks, AVERAGE]:
        line = []
        for i in order:
            r = results[i]
            block = r.get("average") if task == AVERAGE else r.get("results", {}).get(task)
            if task == AVERAGE and len(tasks) == 1:  # the one task itself, with its interval
                block = r.get("results", {}).get(tasks[0])
            if not isinstance(block, Mapping):
                continue
            if task == AVERAGE and set(block.get("tasks", tasks) or tasks) != set(tasks):
                continue  # an average over other tasks is another curve's point
            ci = block.get("score_ci95") or [None, None]
            point: dict[str, Any] = {
                x_name: xs[i],
                "score": _number(block.get("score")),
                "ci95": [_number(ci[0]), _number(ci[1])],
            }
            if task == AVERAGE:
                point["n"] = sum(
                    int(r["results"][t].get("n", 0)) for t in tasks if t in r["results"]
                )
            else:
                point["n"] = block.get("n")
            line.append(point)
        out[task] = line
    return out


def plot_curves(
    path: str | Path,
    series: Mapping[str, Sequence[Mapping[str, Any]]],
    *,
    x_name: str = "x",
    xlabel: str = "x",
    title: str | None = None,
    thresholds: Mapping[str, float] | None = None,
    log2_x: bool = False,
    xticks: Mapping[float, str] | None = None,
) -> Path:
    """Every series (label -> curve) as a line with its 95% band, horizontal dashed lines at
    ``thresholds`` (label -> score), on one chart (:func:`~.plots.interval_lines`)."""
    from chunkwise.eval.plots import interval_lines

    lines = {
        label: [
            (
                float(p[x_name]),
                p.get("score"),
                (p.get("ci95") or [None, None])[0],
                (p.get("ci95") or [None, None])[1],
            )
            for p in curve
        ]
        for label, curve in series.items()
    }
    return interval_lines(
        path,
        lines,
        xlabel=xlabel,
        title=title,
        hlines=dict(thresholds or {}),
        log2_x=log2_x,
        xticks=xticks,
    )


__all__ = ["AVERAGE", "curves", "plot_curves"]
