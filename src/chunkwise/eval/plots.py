"""The benchmarks' and sweeps' PNGs: grouped bars with 95% intervals as error bars
(:func:`interval_bars`), lines with 95% bands (:func:`interval_lines`)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

#: one bar: (value, interval low, interval high), or None where a series has no such group
Bar = tuple[float, float, float] | None
#: one point of a line: (x, value, interval low, interval high); a value that is None or not
#: finite is a gap, a missing bound draws no band there
LinePoint = tuple[float, float | None, float | None, float | None]


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


def save_figure(fig, path: str | Path) -> Path:
    """Lay ``fig`` out, write it to ``path`` (its folder made) at the house resolution, close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def interval_lines(
    path: str | Path,
    series: Mapping[str, Sequence[LinePoint]],
    *,
    xlabel: str = "x",
    ylabel: str = "accuracy (%)",
    title: str | None = None,
    hlines: Mapping[str, float] | None = None,
    log2_x: bool = False,
    xticks: Mapping[float, str] | None = None,
) -> Path:
    """One line per series through its points (x order as given), its 95% interval a shaded
    band, and a dashed horizontal line per entry of ``hlines`` (label -> y); ``xticks`` (x ->
    label) replaces the axis' own ticks. Written with Agg."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    for name, points in series.items():
        drawn = [p for p in points if _finite(p[1])]
        if not drawn:
            continue
        xs = [p[0] for p in drawn]
        line = ax.plot(xs, [p[1] for p in drawn], marker="o", label=str(name).replace("$", r"\$"))
        band = [p for p in drawn if _finite(p[2]) and _finite(p[3])]
        if band:
            ax.fill_between(
                [p[0] for p in band],
                [p[2] for p in band],
                [p[3] for p in band],
                alpha=0.15,
                color=line[0].get_color(),
            )
    for label, y in (hlines or {}).items():
        ax.axhline(y, linestyle="--", linewidth=0.8, color="grey")
        ax.annotate(label, (0.01, y), xycoords=("axes fraction", "data"), fontsize=7,
                    va="bottom")  # fmt: skip
    if log2_x:
        ax.set_xscale("log", base=2)
    if xticks:
        ax.set_xticks(list(xticks), list(xticks.values()))
        ax.minorticks_off()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 105)
    if title:
        ax.set_title(title.replace("$", r"\$"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_figure(fig, path)


__all__ = ["Bar", "LinePoint", "interval_bars", "interval_lines"]
