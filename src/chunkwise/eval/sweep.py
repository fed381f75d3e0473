"""A sweep: one evaluation run per point (a length, a checkpoint), each in its own run folder.

A point is a name (its folder under the sweep's output, e.g. ``len-4096`` or ``step-24``), the
value it is plotted at (a length in tokens, a training step) and the :class:`EvalConfig` of its
run. :func:`run_sweep` runs the points in order through the ordinary harness
(:func:`~chunkwise.eval.runner.run_eval`), so each folder is a complete run that resumes, locks
and rescores like any other; a point whose folder already holds results.json for the same
config and scoring is skipped without loading anything, so rerunning a sweep only runs what is
missing. When every point reads the same model, it is loaded once, on the first point that
needs it, and shared. :func:`point_results` gives each point's results.json content for the
curves (:mod:`.curves`).

Used by ``chunkwise eval --lengths`` (:mod:`.lengths`); a checkpoint sweep builds points of
other models and hands them to the same two functions.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chunkwise.eval.config import RESUME_EXEMPT, EvalConfig
from chunkwise.io import JSONInputError, parse_json

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep."""

    #: folder name under the sweep's output (len-4096, step-24, final)
    name: str
    #: where the point sits on the curve's x axis (tokens, training step)
    x: float
    #: the run's config (its ``output`` is the point's folder)
    cfg: EvalConfig


def point_config(base: EvalConfig, output: str | Path, name: str, **changes: Any) -> EvalConfig:
    """``base`` as the run of one point: written to ``output/name``, with ``changes`` (e.g.
    another ``data``), and without the sweep's own options (a point is a plain run)."""
    return dataclasses.replace(
        base,
        output=str(Path(output) / name),
        lengths=[],
        plan=False,
        **changes,
    )


def finished_results(cfg: EvalConfig) -> dict[str, Any] | None:
    """results.json of ``cfg``'s run folder when it is complete for this very config (every
    setting that changes a prediction equal, same scorer and extraction, every task scored);
    None otherwise (the point must run, resume or be rescored)."""
    from chunkwise.eval.run_dir import stored_config

    path = Path(cfg.output) / "results.json"
    if not path.is_file():
        return None
    try:
        data = parse_json(path.read_bytes())
        old, per_task = data["config"], data["results"]
    except (JSONInputError, OSError, KeyError, TypeError):
        return None
    if not isinstance(old, dict) or not isinstance(per_task, dict):
        return None
    now = stored_config(cfg)
    keep = [k for k in now if k not in RESUME_EXEMPT or k in ("scorer", "extract")]
    if any(old.get(k) != now[k] for k in keep):
        return None
    tasks = cfg.tasks if [t.lower() for t in cfg.tasks] != ["all"] else list(per_task)
    return data if all(t in per_task for t in tasks) else None


def run_sweep(
    points: Sequence[SweepPoint], *, progress: bool = True, llm: Any = None
) -> list[dict[str, Any]]:
    """Run every point not finished yet (:func:`finished_results`); returns each point's
    results.json content, in the order of ``points``.

    ``llm``: an already loaded model for every point (not closed here). Without one, a model
    every point shares is loaded once, when the first unfinished point needs it, and closed at
    the end; points of different models each load their own (:func:`run_eval`)."""
    from chunkwise.eval.runner import run_eval

    checked = [dataclasses.replace(p, cfg=p.cfg.resolved()) for p in points]
    names = [p.name for p in checked]
    if len(set(names)) != len(names):
        raise ValueError(f"sweep points share a folder name: {names}")
    shared = len({p.cfg.model for p in checked}) == 1
    own: Any = None
    out: list[dict[str, Any]] = []
    try:
        for p in checked:
            done = finished_results(p.cfg)
            if done is not None:
                log.info("%s: finished earlier (%s), skipped", p.name, p.cfg.output)
                out.append(done)
                continue
            model = llm
            if model is None and shared:
                if own is None:
                    from chunkwise.llm import load_llm

                    own = load_llm(p.cfg.model)
                model = own
            results = run_eval(p.cfg, llm=model, progress=progress)
            assert results is not None  # one process: rank 0
            out.append(results)
    finally:
        if own is not None:
            own.close()
    return out


__all__ = ["SweepPoint", "finished_results", "point_config", "run_sweep"]
