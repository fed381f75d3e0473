"""The evidence audit's funnels of several runs side by side (``chunkwise compare``): per task, a
table of outcome counts (runs as columns, each adding up to its n) and a stacked-bar PNG.

Reads the ``audit`` block a run's results.json has when it was evaluated with ``--audit``
(:mod:`chunkwise.eval.audit`); a run without one shows no funnel.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.eval.audit.outcomes import OUTCOMES
from chunkwise.eval.plots import save_figure
from chunkwise.io import read_json
from chunkwise.tables import markdown_table


def _results_file(path: str | Path) -> Path:
    path = Path(path)
    return path / "results.json" if path.is_dir() else path


def load_funnels(paths: list[str | Path], labels: list[str]) -> dict[str, Any]:
    """``{task: {label: {n, funnel}}}`` of the runs whose results hold an audit, and the labels
    of those that do not (``without``). ``labels``: one per path (the compare table's)."""
    tasks: dict[str, dict[str, Any]] = {}
    without = []
    for path, label in zip(paths, labels, strict=True):
        file = _results_file(path)
        data = read_json(file, "results file") if file.is_file() else {}
        audit = data.get("audit") if isinstance(data, dict) else None
        if not isinstance(audit, dict) or not audit:
            without.append(label)
            continue
        for task, block in audit.items():
            funnel = block.get("funnel") if isinstance(block, dict) else None
            counts = funnel.values() if isinstance(funnel, dict) else ()
            if (
                not isinstance(funnel, dict)
                or set(funnel) - set(OUTCOMES)
                or not all(isinstance(c, int) and not isinstance(c, bool) for c in counts)
            ):
                raise BadInput(f"{file}: audit.{task} is not a funnel of audit outcomes")
            n = block.get("n")
            if sum(funnel.values()) != n:
                raise BadInput(f"{file}: audit.{task}: the funnel adds up to "
                               f"{sum(funnel.values())}, not n={n}")  # fmt: skip
            tasks.setdefault(task, {})[label] = {"n": n, "funnel": funnel}
    return {"tasks": tasks, "without": without}


def _shown(runs: dict[str, Any]) -> list[str]:
    """The outcomes any of ``runs`` has, in path order."""
    return [o for o in OUTCOMES if any(r["funnel"].get(o) for r in runs.values())]


def to_markdown(funnels: dict[str, Any]) -> str:
    """One table per task: an outcome per row, a run per column, ``count (percent)``."""
    parts = []
    for task, runs in funnels["tasks"].items():
        labels = list(runs)
        rows = []
        for o in _shown(runs):
            row = [o]
            for lab in labels:
                c, n = runs[lab]["funnel"].get(o, 0), runs[lab]["n"]
                row.append(f"{c} ({100 * c / n:.0f}%)" if n else "0")
            rows.append(row)
        rows.append(["**n**", *(f"**{runs[lab]['n']}**" for lab in labels)])
        parts.append(f"Evidence audit, {task}:\n\n" + markdown_table(rows, ["outcome", *labels]))
    if funnels.get("without"):
        parts.append("No audit (run without --audit): " + ", ".join(funnels["without"]) + ".")
    return "\n\n".join(parts)


def plot(funnels: dict[str, Any], path: str | Path, title: str | None = None) -> Path:
    """Stacked bars: one bar per (task, run), its segments the outcomes' shares (percent of n),
    one colour per outcome. Written with Agg."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bars = [(t, lab, r) for t, runs in funnels["tasks"].items() for lab, r in runs.items()]
    if not bars:
        raise BadInput("no run holds an audit; evaluate with --audit to get funnels")
    shown = [o for o in OUTCOMES if any(r["funnel"].get(o) for _, _, r in bars)]
    cmap = plt.get_cmap("tab20")
    fig, ax = plt.subplots(figsize=(max(6.0, 1.0 + 0.7 * len(bars)), 4.8))
    bottom = [0.0] * len(bars)
    for k, o in enumerate(shown):
        share = [100 * r["funnel"].get(o, 0) / r["n"] if r["n"] else 0.0 for _, _, r in bars]
        ax.bar(range(len(bars)), share, 0.7, bottom=bottom, label=o, color=cmap(k % 20))
        bottom = [b + s for b, s in zip(bottom, share, strict=True)]
    names = [f"{t}\n{lab}".replace("$", r"\$") for t, lab, _ in bars]
    ax.set_xticks(range(len(bars)), names, rotation=30 if len(bars) > 4 else 0, fontsize=8,
                  ha="right" if len(bars) > 4 else "center")  # fmt: skip
    ax.set_ylabel("share of predictions (%)")
    ax.set_ylim(0, 100)
    ax.set_title((title or "Evidence audit: where each prediction went").replace("$", r"\$"))
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_figure(fig, path)


__all__ = ["load_funnels", "plot", "to_markdown"]
