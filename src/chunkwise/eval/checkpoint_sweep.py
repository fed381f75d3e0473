"""Evaluating the checkpoints of a training run: ``chunkwise eval --model RUN_DIR
--checkpoints all|last|N,M|watch``.

Each complete step checkpoint (``RUN_DIR/checkpoints/step-N/``, loaded as the hf backend loads
one: :mod:`chunkwise.llm.step_checkpoint`) and the final model (``RUN_DIR`` once its
``train_info.json`` exists) is one point of the sweep driver (:mod:`.sweep`), evaluated into
``OUTPUT/step-N/`` and ``OUTPUT/final/`` (a finished point is skipped on a rerun), logged to
wandb at its training step in one group (``--wandb``). Then ``OUTPUT/curve.json`` and
``OUTPUT/curve.png`` hold each task's score and the task average against the training step,
with the 95% intervals results.json holds (:mod:`.curves`).

``watch`` evaluates checkpoints as the training writes them: it polls the run folder (every
``poll`` seconds through an injectable ``wait``), evaluates whatever is new, and stops once the
run's ``train_info.json`` exists and every checkpoint and the final model are evaluated.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.eval.config import EvalConfig
from chunkwise.eval.curves import AVERAGE, curves, plot_curves
from chunkwise.eval.sweep import SweepPoint, point_config, run_sweep
from chunkwise.io import read_json
from chunkwise.llm.step_checkpoint import FINAL_MARK, run_checkpoints

log = logging.getLogger(__name__)

CURVE_JSON = "curve.json"
CURVE_PNG = "curve.png"
MODES = ("all", "last", "watch")
HOW = "give all, last, watch or training steps (2,4,6)"


def parse_checkpoints(text: str) -> str | list[int]:
    """``all``, ``last``, ``watch``, or the steps of ``N,M`` (sorted, each once)."""
    t = str(text).strip().lower()
    if t in MODES:
        return t
    steps: set[int] = set()
    for part in t.split(","):
        p = part.strip()
        if not p.isdigit():
            raise BadInput(f"--checkpoints {text!r}: {p!r} is not a training step; {HOW}")
        steps.add(int(p))
    return sorted(steps)


def check_run_dir(run_dir: Path) -> None:
    """``run_dir`` must be a training run's output folder."""
    if not run_dir.is_dir():
        raise BadInput(f"--checkpoints: --model {run_dir} is not a folder (a training run's)")
    if not (run_dir / "checkpoints").is_dir() and not (run_dir / FINAL_MARK).is_file():
        raise BadInput(
            f"--checkpoints: {run_dir} is not a training run's output folder (no checkpoints/ "
            f"and no {FINAL_MARK}); give --model the output_dir of a chunkwise train run"
        )


def final_step(run_dir: Path) -> int | None:
    """The training step of the final model (None while the run has not finished)."""
    path = run_dir / FINAL_MARK
    if not path.is_file():
        return None
    info = read_json(path, "training summary")
    steps = info.get("steps") if isinstance(info, dict) else None
    if not isinstance(steps, int):
        raise BadInput(f"{path}: no whole number 'steps' (the run's training steps)")
    return steps


def checkpoint_points(
    cfg: EvalConfig, run_dir: Path, which: str | list[int], *, group: str | None = None
) -> list[SweepPoint]:
    """The sweep points of ``which`` among ``run_dir``'s complete checkpoints (and its final
    model when finished): ``step-N`` at x = N, ``final`` at x = the run's step count."""
    found = run_checkpoints(run_dir)
    if isinstance(which, list):
        have = {c.step for c in found}
        lost = [s for s in which if s not in have]
        if lost:
            raise BadInput(
                f"--checkpoints: {run_dir} has no complete checkpoint of step {lost[0]} "
                f"(it has {sorted(have) or 'none'})"
            )
        found = [c for c in found if c.step in which]
    elif which == "last":
        found = found[-1:]
    steps = final_step(run_dir)
    want_final = steps is not None and (which in ("all", "last", "watch"))
    chosen: list[tuple[str, int, str]] = [(f"step-{c.step}", c.step, str(c.folder)) for c in found]
    if want_final:
        chosen.append(("final", steps, str(run_dir)))
    if which == "last" and want_final:
        chosen = chosen[-1:]  # the final model is the last
    return [
        SweepPoint(
            name,
            step,
            point_config(
                cfg,
                cfg.output,
                name,
                model=model,
                checkpoints=None,
                wandb_step=step,
                wandb_group=group,
            ),
        )
        for name, step, model in chosen
    ]


def curve_report(
    cfg: EvalConfig, run_dir: Path, points: Sequence[SweepPoint], results: Sequence[dict]
) -> dict[str, Any]:
    """curve.json's content: each task's and the average's curve against the training step."""
    lines = curves([p.x for p in points], results, x_name="step")
    order = sorted(range(len(points)), key=lambda i: points[i].x)
    for task, line in lines.items():  # each curve point names its run (step-N or final)
        has = [i for i in order if task in (results[i].get("results") or {}) or task == AVERAGE]
        named = [points[i] for i in has if task != AVERAGE or results[i].get("average")]
        for p, sp in zip(line, named, strict=False):
            p["run"] = sp.name
    return {
        "run_dir": str(run_dir),
        "benchmark": cfg.benchmark,
        "strategy": cfg.strategy,
        "data": cfg.data,
        "tasks": [t for t in lines if t != AVERAGE],
        "points": [{"name": p.name, "step": int(p.x), "output": p.cfg.output} for p in points],
        "curves": lines,
    }


def write_curve(cfg: EvalConfig, run_dir: Path, points: Sequence[SweepPoint], results) -> dict:
    """``OUTPUT/curve.json`` and ``OUTPUT/curve.png``; returns the JSON's content."""
    from chunkwise.io import atomic_write_json

    report = curve_report(cfg, run_dir, points, results)
    out = Path(cfg.output)
    out.mkdir(parents=True, exist_ok=True)
    report["files"] = {"json": CURVE_JSON, "png": CURVE_PNG}
    atomic_write_json(out / CURVE_JSON, report)
    lines = report["curves"]
    series = {t: line for t, line in lines.items() if t != AVERAGE or len(lines) > 2}
    plot_curves(
        out / CURVE_PNG,
        series,
        x_name="step",
        xlabel="training step",
        title=f"{cfg.benchmark}: score against step ({cfg.strategy}, {run_dir.name})",
    )
    return report


def run_checkpoint_sweep(
    cfg: EvalConfig,
    *,
    progress: bool = True,
    wait: Callable[[float], None] = time.sleep,
    poll: float = 30.0,
) -> dict[str, Any]:
    """Evaluate the checkpoints ``cfg.checkpoints`` names of the run at ``cfg.model``; write
    the curve; returns curve.json's content. ``watch`` polls with ``wait(poll)`` until the run
    has finished and everything is evaluated."""
    cfg = cfg.resolved()
    run_dir = Path(cfg.model).expanduser()
    check_run_dir(run_dir)
    which = parse_checkpoints(cfg.checkpoints or "")
    group = f"{Path(cfg.output).name}-checkpoints"
    if which != "watch":
        points = checkpoint_points(cfg, run_dir, which, group=group)
        if not points:
            raise BadInput(f"--checkpoints {cfg.checkpoints}: {run_dir} has nothing to evaluate")
        return write_curve(cfg, run_dir, points, run_sweep(points, progress=progress))
    # every point seen, kept when the training later deletes its checkpoint (save_total_limit)
    seen: dict[str, SweepPoint] = {}
    report: dict[str, Any] | None = None
    while True:
        finished = final_step(run_dir) is not None  # read first: then no checkpoint is missed
        new = [
            p for p in checkpoint_points(cfg, run_dir, "watch", group=group) if p.name not in seen
        ]
        if new:
            log.info("evaluating %s", ", ".join(p.name for p in new))
            seen.update((p.name, p) for p in new)
            points = sorted(seen.values(), key=lambda p: (p.x, p.name == "final"))
            results = run_sweep(points, progress=progress)  # finished ones are skipped
            report = write_curve(cfg, run_dir, points, results)
        if finished:
            if report is None:
                raise BadInput(f"--checkpoints watch: {run_dir} finished with nothing to evaluate")
            return report
        wait(poll)


# -- chunkwise compare SWEEP SWEEP -----------------------------------------------------------


def is_sweep(folder: str | Path) -> bool:
    """Whether ``folder`` is a checkpoint sweep's output (it holds curve.json)."""
    return (Path(folder) / CURVE_JSON).is_file()


def compare_sweeps(folders: Sequence[str | Path]) -> dict[str, Any]:
    """Several sweeps' curves side by side: ``{"tasks", "sweeps": {folder: curves}}``."""
    sweeps: dict[str, Any] = {}
    tasks: list[str] = []
    for f in folders:
        data = read_json(Path(f) / CURVE_JSON, "checkpoint sweep curve")
        lines = data.get("curves") if isinstance(data, dict) else None
        if not isinstance(lines, dict):
            raise BadInput(f"{Path(f) / CURVE_JSON}: no 'curves' (not a checkpoint sweep's)")
        sweeps[str(f)] = lines
        tasks.extend(t for t in lines if t not in tasks)
    return {"tasks": tasks, "sweeps": sweeps}


def sweeps_markdown(table: dict[str, Any], task: str = AVERAGE) -> str:
    """One row per point (step, run), one column per sweep: ``task``'s score [95% interval]."""
    from chunkwise.tables import estimate, markdown_table

    keys: list[tuple[int, str]] = []
    cells: dict[tuple[int, str], dict[str, str]] = {}
    for folder, lines in table["sweeps"].items():
        for p in lines.get(task, []):
            key = (p["step"], p.get("run", ""))
            if key not in cells:
                keys.append(key)
            lo, hi = p["ci95"]
            score = p["score"]
            text = "" if score is None else f"{score:.1f}"
            if score is not None and lo is not None and hi is not None:
                text = estimate(score, lo, hi, digits=1)
            cells.setdefault(key, {})[Path(folder).name] = text
    names = [Path(f).name for f in table["sweeps"]]
    rows = [[step, run, *(cells[(step, run)].get(n) for n in names)] for step, run in sorted(keys)]
    return f"{task}:\n" + markdown_table(rows, ["step", "run", *names], missing="")


def plot_sweeps(table: dict[str, Any], path: str | Path, *, title: str | None = None) -> Path:
    """Every sweep's curves (the average, or the one task) on one chart."""
    task = AVERAGE if len(table["tasks"]) > 2 else table["tasks"][0]
    series = {Path(f).name: lines.get(task, []) for f, lines in table["sweeps"].items()}
    return plot_curves(
        path, series, x_name="step", xlabel="training step", title=title or f"{task} by step"
    )


__all__ = [
    "CURVE_JSON",
    "CURVE_PNG",
    "check_run_dir",
    "checkpoint_points",
    "compare_sweeps",
    "curve_report",
    "final_step",
    "is_sweep",
    "parse_checkpoints",
    "plot_sweeps",
    "run_checkpoint_sweep",
    "sweeps_markdown",
    "write_curve",
]
