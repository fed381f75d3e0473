"""Grouped bars with 95% intervals as error bars, for the benchmarks' PNGs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

#: one bar: (value, interval low, interval high), or None where a series has no such group
Bar = tuple[float, float, float] | None


def interval_bars(
    path: str | Path,
    groups: Sequence[str],
    series: Mapping[str, Sequence[Bar]],
    *,
    ylabel: str = "accuracy (%)",
    rotation: int = 0,
    fontsize: int = 9,
) -> Path:
    """One group of bars per entry of ``groups``, one bar per series, each with its interval
    drawn as an error bar; a series' missing groups (and bars with a value or bound that is not
    a finite number) are left empty. Written with Agg."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 1.5 * len(groups)), 4.0))
    width = 0.8 / max(1, len(series))
    for i, (name, bars) in enumerate(series.items()):
        xs, ys, err = [], [], [[], []]
        for j, bar in enumerate(bars):
            if bar is None or not all(math.isfinite(x) for x in bar):
                continue  # missing or not a number: a gap
            value, lo, hi = bar
            xs.append(j + i * width)
            ys.append(value)
            err[0].append(value - lo)
            err[1].append(hi - value)
        ax.bar(xs, ys, width, yerr=err, capsize=2, label=name)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(groups))], groups, rotation=rotation,
                  fontsize=fontsize)  # fmt: skip
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 105)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


__all__ = ["Bar", "interval_bars"]
