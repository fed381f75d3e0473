"""Compare evaluation runs: a tasks × runs table (with averages) and a grouped bar chart.

Reads ``results.json`` from each run folder. The average row averages each run over the tasks
*every* run has (so runs are compared on the same tasks); the average column averages each
task over the runs that have it. Columns scored differently from the first one (scorer, n or
prompt templates) are marked, with a note saying how.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.io import read_json

#: what must agree for two columns to be comparable; a column that differs is marked (the
#: extractor is not among them: under ``extract: auto`` it follows the strategy, which is what
#: columns usually compare; each column's note still names it)
COMPARABLE = ("scorer", "n", "templates")
MARK = "⚠"
PLOT_SUFFIXES = (".png", ".pdf", ".svg")


@dataclass
class Run:
    label: str
    path: Path
    scores: dict[str, float]
    info: dict[str, Any] = field(default_factory=dict)


def load_run(path: str | Path) -> Run:
    """One run: a ``chunkwise eval`` folder (or its results.json), or a folder whose
    sub-folders are eval runs of one model and strategy on several benchmarks, merged into one
    column (a task two of them share is named ``<sub-folder>/<task>``)."""
    path = Path(path)
    if path.is_dir() and not (path / "results.json").exists():
        parts = sorted(p for p in path.iterdir() if (p / "results.json").is_file())
        if parts:
            return _merged_run(path, [load_run(p) for p in parts])
    results_file = path / "results.json" if path.is_dir() else path
    if not results_file.is_file():
        raise BadInput(
            f"{results_file} not found; is {path} a finished `chunkwise eval` run folder?"
        )
    data = read_json(results_file, "results file")
    try:
        scores = {task: float(r["score"]) for task, r in data["results"].items()}
        cfg = data.get("config", {})
        extracts = {str(r.get("extract", cfg.get("extract"))) for r in data["results"].values()}
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise BadInput(f"{results_file}: not a chunkwise results file ({e})") from None
    label = results_file.parent.name if results_file.name == "results.json" else results_file.stem
    info = {
        "model": cfg.get("model"),
        "strategy": cfg.get("strategy"),
        "scorer": cfg.get("scorer"),
        "extract": " | ".join(sorted(extracts)),
        "templates": _templates_of(data),
        "data": cfg.get("data"),
        "n": {t: r.get("n") for t, r in data["results"].items()},
        "aliases": {t: r.get("alias", t) for t, r in data["results"].items()},
    }
    return Run(label, results_file.parent, scores, info)


def _templates_of(data: dict[str, Any]) -> str:
    """Which prompts a run used, in a few words (official family and hash, or our version)."""
    t = data.get("templates") or {}
    if t.get("kind") == "official":
        return f"official {t.get('family')} {str(t.get('templates_sha256', ''))[:8]}"
    version = t.get("version") or (data.get("benchmark") or {}).get("prompt_version")
    return f"chunkwise {version}" if version else "unknown"


def _merged_run(path: Path, parts: list[Run]) -> Run:
    counts: dict[str, int] = {}
    for part in parts:
        for task in part.scores:
            counts[task] = counts.get(task, 0) + 1
    scores: dict[str, float] = {}
    info: dict[str, Any] = {"n": {}, "aliases": {}, "parts": [str(p.path) for p in parts]}
    for part in parts:
        for task, value in part.scores.items():
            name = task if counts[task] == 1 else f"{part.path.name}/{task}"
            scores[name] = value
            info["n"][name] = part.info["n"].get(task)
            alias = part.info["aliases"].get(task, task)
            info["aliases"][name] = alias if counts[task] == 1 else f"{part.path.name}/{alias}"
    for key in ("model", "strategy", "scorer", "extract", "templates"):
        values = {str(p.info.get(key)) for p in parts}
        info[key] = values.pop() if len(values) == 1 else " | ".join(sorted(values))
    info["data"] = " | ".join(str(p.info.get("data")) for p in parts)
    return Run(path.name, path, scores, info)


def _unique_labels(runs: list[Run]) -> None:
    seen: dict[str, int] = {}
    for r in runs:
        seen[r.label] = seen.get(r.label, 0) + 1
    for r in runs:
        if seen[r.label] > 1:  # same folder name in different places: show more of the path
            r.label = f"{r.path.parent.name}/{r.path.name}" if r.path.parent.name else str(r.path)
    labels = [r.label for r in runs]
    if len(set(labels)) != len(labels):
        for i, r in enumerate(runs):
            r.label = f"{r.label}#{i + 1}"


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def build_table(runs: list[Run]) -> dict[str, Any]:
    if not runs:
        raise BadInput("give at least one run folder")
    _unique_labels(runs)
    tasks: list[str] = []
    for r in runs:
        tasks.extend(t for t in r.scores if t not in tasks)
    common = [t for t in tasks if all(t in r.scores for r in runs)]
    scores = {t: {r.label: r.scores.get(t) for r in runs} for t in tasks}
    task_avg = {t: _mean([v for v in scores[t].values() if v is not None]) for t in tasks}
    run_avg = {r.label: _mean([r.scores[t] for t in common]) for r in runs}
    overall = _mean([v for v in run_avg.values() if v is not None])
    aliases: dict[str, str] = {}
    for r in runs:
        for t, a in r.info.get("aliases", {}).items():
            aliases.setdefault(t, a)
    differs = _differences(runs, common)
    return {
        "differs": differs,
        "marked": sorted({lab for d in differs.values() for lab in d["runs"]}),
        "runs": [
            {
                "label": r.label,
                "path": str(r.path),
                **{k: v for k, v in r.info.items() if k != "aliases"},
            }
            for r in runs
        ],
        "tasks": tasks,
        "aliases": aliases,
        "scores": scores,
        "task_average": task_avg,
        "run_average": run_avg,
        "average": overall,
        "average_over": common,
    }


def _differences(runs: list[Run], common: list[str]) -> dict[str, Any]:
    """For each of :data:`COMPARABLE` on which the runs disagree: every run's value and the
    runs that differ from the first one (those columns are marked)."""
    out: dict[str, Any] = {}
    for key in COMPARABLE:
        if key == "n":
            values = {
                r.label: ", ".join(f"{t}={r.info.get('n', {}).get(t)}" for t in common)
                for r in runs
            }
        else:
            values = {r.label: str(r.info.get(key)) for r in runs}
        first = values[runs[0].label]
        odd = [lab for lab, v in values.items() if v != first]
        if odd:
            out[key] = {"values": values, "runs": odd}
    return out


def _fmt(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}"


def to_markdown(table: dict[str, Any]) -> str:
    labels = [r["label"] for r in table["runs"]]
    multi = len(labels) > 1
    marked = set(table.get("marked", []))
    head = ["task", *(f"{lab} {MARK}" if lab in marked else lab for lab in labels)] + (
        ["average"] if multi else []
    )
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for t in table["tasks"]:
        row = [t, *(_fmt(table["scores"][t][lab]) for lab in labels)]
        if multi:
            row.append(_fmt(table["task_average"][t]))
        lines.append("| " + " | ".join(row) + " |")
    avg = ["**average**", *(f"**{_fmt(table['run_average'][lab])}**" for lab in labels)]
    if multi:
        avg.append(f"**{_fmt(table['average'])}**")
    lines.append("| " + " | ".join(avg) + " |")
    notes = []
    left_out = [t for t in table["tasks"] if t not in table["average_over"]]
    if left_out:
        notes.append(
            f"The average row covers the tasks every run has; left out: {', '.join(left_out)}."
        )
    for key, d in table.get("differs", {}).items():
        values = "; ".join(f"{lab}: {v}" for lab, v in d["values"].items())
        notes.append(
            f"{MARK} columns differ in {key} from the first column, so their scores are not "
            f"directly comparable ({values})."
        )
    for r in table["runs"]:
        parts = [
            f"{k} {r[k]}"
            for k in ("model", "strategy", "scorer", "extract", "templates", "data")
            if r.get(k)
        ]
        notes.append(f"- {r['label']}: {', '.join(parts) or r['path']}")
    return "\n".join(lines) + ("\n\n" + "\n".join(notes) if notes else "")


def plot(table: dict[str, Any], path: str | Path, title: str | None = None) -> Path:
    """A grouped bar chart: one group per task (and the average), one bar per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r["label"] for r in table["runs"]]
    groups = [*table["tasks"], "average"]
    values = {
        lab: [*(table["scores"][t][lab] for t in table["tasks"]), table["run_average"][lab]]
        for lab in labels
    }
    n_runs, n_groups = len(labels), len(groups)
    width = 0.8 / n_runs
    fig_w = max(6.0, 1.2 + n_groups * (0.45 + 0.35 * n_runs))
    fig, ax = plt.subplots(figsize=(min(fig_w, 40.0), 5.0))
    cmap = plt.get_cmap("tab10")
    font = 8 if n_runs * n_groups <= 40 else 6
    for k, lab in enumerate(labels):
        xs = [g + (k - (n_runs - 1) / 2) * width for g in range(n_groups)]
        heights = [0.0 if v is None else v for v in values[lab]]
        bars = ax.bar(
            xs,
            heights,
            width * 0.95,
            label=lab,
            color=cmap(k % 10),
            edgecolor="black",
            linewidth=0.4,
        )
        bars[-1].set_hatch("//")  # the average group
        for bar, v in zip(bars, values[lab], strict=True):
            text = "n/a" if v is None else f"{v:.1f}"
            ax.annotate(
                text,
                (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                xytext=(0, 2),
                textcoords="offset points",
                ha="center",
                va="bottom",
                fontsize=font,
                rotation=90 if n_runs > 3 else 0,
            )
    ax.axvline(n_groups - 1.5, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(n_groups))
    partial = len(table["average_over"]) < len(table["tasks"])
    names = [*table["tasks"], "average\n(tasks all runs have)" if partial else "average"]
    ax.set_xticklabels(
        names, rotation=30 if n_groups > 6 else 0, ha="right" if n_groups > 6 else "center"
    )
    top = max([v for lab in labels for v in values[lab] if v is not None] + [1.0])
    ax.set_ylim(0, max(100.0, top) * 1.15)
    ax.set_ylabel("score (%)")
    scorers = sorted({str(r.get("scorer")) for r in table["runs"]})
    ax.set_title(title or f"Scores by task ({', '.join(scorers)} scorer)")
    ax.legend(title="run", fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def check_output_file(path: str | Path, flag: str, suffixes: tuple[str, ...] = ()) -> Path:
    """An output file path that can be written: not a folder, no file among its parents, one
    of ``suffixes`` (when given). Checked before any work, so nothing is lost to it."""
    path = Path(path)
    if path.is_dir():
        raise BadInput(f"{flag} {path} is a folder; give a file name")
    if suffixes and path.suffix.lower() not in suffixes:
        raise BadInput(f"{flag} {path}: the file name must end in {' / '.join(suffixes)}")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise BadInput(f"{flag} {path}: {parent} is a file, so nothing can be made in it")
            break
    return path


def compare(paths: list[str | Path]) -> dict[str, Any]:
    return build_table([load_run(p) for p in paths])


__all__ = [
    "COMPARABLE",
    "Run",
    "build_table",
    "check_output_file",
    "compare",
    "load_run",
    "plot",
    "to_markdown",
]
