"""Compare evaluation runs: a tasks × runs table (with averages) and a grouped bar chart.

Reads ``results.json`` from each run folder. The average row averages each run over the tasks
*every* run has (so runs are compared on the same tasks); the average column averages each
task over the runs that have it. Columns scored differently from the first one (scorer, n or
prompt templates) are marked, with a note saying how.
"""

from __future__ import annotations

import math
import re
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.io import read_json
from chunkwise.tables import markdown_table

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
    #: task -> score; None where the file's score is not a finite number (a gap)
    scores: dict[str, float | None]
    info: dict[str, Any] = field(default_factory=dict)


def load_run(path: str | Path) -> Run:
    """One run: a ``chunkwise eval`` folder (or its results.json), or a folder whose
    sub-folders are eval runs of one model and strategy on several benchmarks, merged into one
    column (a task two of them share is named ``<sub-folder>/<task>``).

    What must be there (an object of task results, each with a numeric score) is checked,
    naming the file and the field; a score that is not a finite number is shown as a gap, and
    descriptive fields of an odd shape (``config``, ``templates``, ``benchmark``, a task's
    ``n`` or ``alias``) are left out; both with a note under the table."""
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
    if not isinstance(data, dict):
        raise BadInput(
            f"{results_file}: not a chunkwise results file (the top level is "
            f"{_kind(data)}, not an object)"
        )
    notes: list[str] = []
    tasks = _task_results(data, results_file)
    scores = {task: _score(r, task, results_file, notes) for task, r in tasks.items()}
    cfg = _section(data, "config", notes)
    label = results_file.parent.name if results_file.name == "results.json" else results_file.stem
    info = {
        **{key: _scalar(cfg, key, "config", notes) for key in ("model", "strategy", "scorer")},
        "extract": _extracts(tasks, cfg),
        "templates": _templates_of(data, notes),
        "data": _scalar(cfg, "data", "config", notes),
        "n": {t: _count(r, t, notes) for t, r in tasks.items()},
        "aliases": {t: _alias(r, t, notes) for t, r in tasks.items()},
        "notes": notes,
    }
    return Run(label, results_file.parent, scores, info)


def _kind(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "text", bool: "a boolean"}
    if value is None:
        return "null"
    return names.get(type(value), "a number")


def _task_results(data: dict[str, Any], file: Path) -> dict[str, dict[str, Any]]:
    results = data.get("results")
    if not isinstance(results, dict):
        what = "missing" if results is None else f"{_kind(results)}, not an object of tasks"
        raise BadInput(f"{file}: not a chunkwise results file (field 'results' is {what})")
    for task, r in results.items():
        if not isinstance(r, dict) or "score" not in r:
            what = "has no 'score'" if isinstance(r, dict) else f"is {_kind(r)}, not an object"
            raise BadInput(f"{file}: not a chunkwise results file ({_field(task)} {what})")
    return results


def _score(r: dict[str, Any], task: str, file: Path, notes: list[str]) -> float | None:
    """A task's score; None (a gap, with a note) when it is not a finite number."""
    raw = r["score"]
    value = None
    if isinstance(raw, (int, float, str)) and not isinstance(raw, bool):
        try:
            value = float(raw)
        except (ValueError, OverflowError):
            value = None if isinstance(raw, str) else math.inf
    if value is None:
        raise BadInput(
            f"{file}: {_field(task)}.score is {_short(raw)}, not a number; fix the file or "
            "rerun `chunkwise eval` on that folder to score it again"
        )
    if not math.isfinite(value):
        notes.append(f"{_field(task)}.score is {_short(raw)}, not a finite number: a gap")
        return None
    return value


def _field(task: str) -> str:
    """Where a task's result is in the file, printable on one line."""
    return f"results.{task}" if re.fullmatch(r"[\w.\-]+", task) else f"results[{task!r}]"


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _section(data: dict[str, Any], key: str, notes: list[str]) -> dict[str, Any]:
    """An optional object field; anything else is left out, with a note."""
    value = data.get(key)
    if value is None or isinstance(value, dict):
        return value or {}
    notes.append(f"field {key!r} is {_kind(value)}, not an object: left out")
    return {}


def _scalar(section: dict[str, Any], key: str, where: str, notes: list[str]) -> Any:
    value = section.get(key)
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    notes.append(f"{where}.{key} is {_kind(value)}, not a value: left out")
    return None


def _extracts(tasks: dict[str, dict[str, Any]], cfg: dict[str, Any]) -> str:
    return " | ".join(sorted({str(r.get("extract", cfg.get("extract"))) for r in tasks.values()}))


def _count(r: dict[str, Any], task: str, notes: list[str]) -> int | None:
    n = r.get("n")
    if n is None or (isinstance(n, int) and not isinstance(n, bool) and n >= 0):
        return n
    notes.append(f"{_field(task)}.n is {_short(n)}, not a count: left out")
    return None


def _alias(r: dict[str, Any], task: str, notes: list[str]) -> str:
    alias = r.get("alias", task)
    if isinstance(alias, str) and alias.strip():
        return alias
    notes.append(f"{_field(task)}.alias is {_short(alias)}, not a name: the task name is used")
    return task


def _templates_of(data: dict[str, Any], notes: list[str]) -> str:
    """Which prompts a run used, in a few words (official family and hash, or our version)."""
    t = _section(data, "templates", notes)
    if t.get("kind") == "official":
        return f"official {t.get('family')} {str(t.get('templates_sha256', ''))[:8]}"
    version = t.get("version") or _section(data, "benchmark", notes).get("prompt_version")
    return f"chunkwise {version}" if version else "unknown"


def _merged_run(path: Path, parts: list[Run]) -> Run:
    counts: dict[str, int] = {}
    for part in parts:
        for task in part.scores:
            counts[task] = counts.get(task, 0) + 1
    scores: dict[str, float | None] = {}
    info: dict[str, Any] = {"n": {}, "aliases": {}, "parts": [str(p.path) for p in parts]}
    info["notes"] = [f"{p.path.name}: {note}" for p in parts for note in p.info.get("notes", [])]
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
    common = [t for t in tasks if all(r.scores.get(t) is not None for r in runs)]
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
    rows = []
    for t in table["tasks"]:
        row = [t, *(_fmt(table["scores"][t][lab]) for lab in labels)]
        if multi:
            row.append(_fmt(table["task_average"][t]))
        rows.append(row)
    avg = ["**average**", *(f"**{_fmt(table['run_average'][lab])}**" for lab in labels)]
    if multi:
        avg.append(f"**{_fmt(table['average'])}**")
    rows.append(avg)
    text = markdown_table(rows, head)
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
        notes.extend(f"- {r['label']}: {note}" for note in r.get("notes", []))
    return text + ("\n\n" + "\n".join(notes) if notes else "")


def _finite(v: Any) -> float | None:
    """A value to draw: a finite number, else None (a gap)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
        return float(v)
    return None


def _text(value: Any) -> str:
    """Text for the chart as written: matplotlib reads ``$...$`` as math and fails on bad math."""
    return str(value).replace("$", r"\$")


def _y_range(values: list[float]) -> tuple[float, float]:
    """0 .. 100 (or the values' range) with room for the labels above the bars."""
    limit = sys.float_info.max / 2  # the room added must not overflow to inf
    low, high = min([0.0, *values]), max([100.0, *values])
    return max(low, -limit) * 1.15, min(high, limit) * 1.15


def plot(table: dict[str, Any], path: str | Path, title: str | None = None) -> Path:
    """A grouped bar chart: one group per task (and the average), one bar per run. A score
    that is missing or not a finite number is a gap, marked n/a."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [r["label"] for r in table["runs"]]
    groups = [*table["tasks"], "average"]
    values = {
        lab: [
            _finite(v)
            for v in (*(table["scores"][t][lab] for t in table["tasks"]), table["run_average"][lab])
        ]
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
        drawn = [g for g, v in enumerate(values[lab]) if v is not None]
        bars = ax.bar(
            [xs[g] for g in drawn],
            [values[lab][g] for g in drawn],
            width * 0.95,
            label=_text(lab),
            color=cmap(k % 10),
            edgecolor="black",
            linewidth=0.4,
        )
        for g, bar in zip(drawn, bars, strict=True):
            if g == n_groups - 1:
                bar.set_hatch("//")  # the average group
        for g, v in enumerate(values[lab]):
            ax.annotate(
                "n/a" if v is None else f"{v:.1f}",
                (xs[g], 0.0 if v is None else max(v, 0.0)),
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
        [_text(n) for n in names],
        rotation=30 if n_groups > 6 else 0,
        ha="right" if n_groups > 6 else "center",
    )
    ax.set_ylim(*_y_range([v for lab in labels for v in values[lab] if v is not None]))
    ax.set_ylabel("score (%)")
    scorers = sorted({str(r.get("scorer")) for r in table["runs"]})
    ax.set_title(_text(title or f"Scores by task ({', '.join(scorers)} scorer)"))
    ax.legend(title="run", fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # a task name in a script the font lacks is still drawn
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        fig.tight_layout()
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
