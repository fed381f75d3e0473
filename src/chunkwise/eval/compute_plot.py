"""Compute-matched comparison: what each run spent per example beside what it scored.

``chunkwise compare RUN... --compute-plot FILE.png`` reads each run's results.json: per task
(and over all its examples) the score with its 95% interval, and from ``strategy_stats`` the
prefill (prompt) tokens, decode (completion) tokens, LLM calls and seconds per example. It
prints them as a table, writes ``FILE.json`` beside the PNG, and draws accuracy against prefill
tokens per example, one point per run with its interval as an error bar, one panel per task
(and one for the task average when the runs share several tasks). A strategy that scores more
at the same x spends the same compute; one that scores more only further right bought its
score with tokens.

Seconds are the strategy's own wall time per example (summed over examples; under
``--parallel`` the examples overlap, so they add up to more than the run took).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.eval.plots import save_figure
from chunkwise.io import read_json

#: per-example stats shown, as (results.json key, column name)
COMPUTE_KEYS = (
    ("prompt_tokens", "prefill_tokens"),
    ("completion_tokens", "decode_tokens"),
    ("llm_calls", "llm_calls"),
    ("seconds", "seconds"),
)
#: the panel of the task average (stats over all the run's examples)
ALL = "average"


def _per_example(block: Any) -> dict[str, float | None]:
    per = block.get("per_example", {}) if isinstance(block, dict) else {}
    out: dict[str, float | None] = {}
    for key, name in COMPUTE_KEYS:
        v = per.get(key) if isinstance(per, dict) else None
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        out[name] = float(v) if ok else None
    return out


def run_compute(path: str | Path, label: str) -> dict[str, Any]:
    """One run's row: per task and ``average``, score, 95% interval, n and compute per
    example."""
    from chunkwise.eval.compare import load_run

    run = load_run(path)  # the checks and messages of `chunkwise compare`
    if "parts" in run.info:
        raise BadInput(
            f"--compute-plot: {path} holds several runs; give each run folder (with its own "
            "results.json)"
        )
    data = read_json(run.path / "results.json", "results file")
    stats = data.get("strategy_stats") or {}
    tasks: dict[str, Any] = {}
    for task, r in data["results"].items():
        tasks[task] = {
            "score": run.scores.get(task),
            "ci95": r.get("score_ci95"),
            "n": r.get("n"),
            **_per_example(stats.get(task)),
        }
    avg = data.get("average") or {}
    if len(tasks) == 1:  # the one task itself, with its own (bootstrap) interval
        only = next(iter(tasks.values()))
        avg = {"score": only["score"], "score_ci95": only["ci95"]}
    tasks[ALL] = {
        "score": avg.get("score"),
        "ci95": avg.get("score_ci95"),
        "n": sum(int(t.get("n") or 0) for t in tasks.values()),
        **_per_example(stats.get("all")),
    }
    return {
        "label": label,
        "path": str(run.path),
        "strategy": run.info.get("strategy"),
        "model": run.info.get("model"),
        "tasks": tasks,
    }


def compute_table(paths: Sequence[str | Path], labels: Sequence[str]) -> dict[str, Any]:
    """Every run's row (:func:`run_compute`) under the labels ``chunkwise compare`` gave."""
    return {
        "x": "prefill_tokens per example",
        "runs": [run_compute(p, lab) for p, lab in zip(paths, labels, strict=True)],
    }


def _fmt(v: Any, digits: int = 1) -> str:
    return "–" if not isinstance(v, (int, float)) else f"{v:,.{digits}f}"


def to_markdown(table: dict[str, Any]) -> str:
    from chunkwise.tables import markdown_table

    rows = []
    for run in table["runs"]:
        for task, t in run["tasks"].items():
            ci = t.get("ci95") or [None, None]
            rows.append(
                [
                    run["label"],
                    task,
                    f"{_fmt(t['score'])} [{_fmt(ci[0])}, {_fmt(ci[1])}]",
                    t.get("n"),
                    _fmt(t["prefill_tokens"], 0),
                    _fmt(t["decode_tokens"], 0),
                    _fmt(t["llm_calls"], 2),
                    _fmt(t["seconds"], 2),
                ]
            )
    head = ["run", "task", "score [95%]", "n", "prefill/ex", "decode/ex", "calls/ex", "s/ex"]
    return markdown_table(rows, head, align="llrrrrrr")


def panels(table: dict[str, Any]) -> list[str]:
    """The tasks every run has, in the first run's order, and the average when there are
    several."""
    runs = table["runs"]
    shared = [t for t in runs[0]["tasks"] if t != ALL and all(t in r["tasks"] for r in runs)]
    return shared + ([ALL] if len(shared) > 1 else [])


def plot_compute(table: dict[str, Any], path: str | Path, title: str | None = None) -> Path:
    """Accuracy against prefill tokens per example (log scale), one panel per task of
    :func:`panels`, one point per run with its 95% interval."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = panels(table)
    if not names:
        raise BadInput("--compute-plot: the runs share no task to draw")
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names) + 1.5, 4.0), squeeze=False)
    cmap = plt.get_cmap("tab10")
    for ax, task in zip(axes[0], names, strict=True):
        for k, run in enumerate(table["runs"]):
            t = run["tasks"][task]
            x, y = t["prefill_tokens"], t["score"]
            if x is None or y is None or x <= 0:
                continue
            ci = t.get("ci95") or [None, None]
            err = None
            if all(isinstance(v, (int, float)) for v in ci):
                err = [[max(0.0, y - ci[0])], [max(0.0, ci[1] - y)]]
            ax.errorbar([x], [y], yerr=err, fmt="o", capsize=3, color=cmap(k % 10),
                        label=str(run["label"]).replace("$", r"\$"))  # fmt: skip
            ax.annotate(str(run["label"]).replace("$", r"\$"), (x, y), xytext=(4, 4),
                        textcoords="offset points", fontsize=7)  # fmt: skip
        ax.set_xscale("log")
        ax.margins(x=0.25)
        ax.set_title(task)
        ax.set_xlabel("prefill tokens per example")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("score (%)")
    axes[0][-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    if title:
        fig.suptitle(title.replace("$", r"\$"))
    return save_figure(fig, path)


def write_compute(
    paths: Sequence[str | Path], labels: Sequence[str], png: str | Path, title: str | None = None
) -> dict[str, Any]:
    """The table, ``png`` and its JSON beside it (same name, ``.json``); returns the table."""
    from chunkwise.io import atomic_write_json

    table = compute_table(paths, labels)
    table["files"] = {"png": str(png), "json": str(Path(png).with_suffix(".json"))}
    plot_compute(table, png, title)
    atomic_write_json(Path(png).with_suffix(".json"), table)
    return table


__all__ = [
    "ALL",
    "COMPUTE_KEYS",
    "compute_table",
    "panels",
    "plot_compute",
    "run_compute",
    "to_markdown",
    "write_compute",
]
