"""`chunkwise eval`: score a model under one decoding strategy on benchmark tasks."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = "evaluate a model (or training checkpoint) with a strategy on InfiniteBench tasks"


def add_arguments(p: argparse.ArgumentParser) -> None:
    from chunkwise.config.flags import add_flags
    from chunkwise.eval.config import EvalConfig

    p.add_argument(
        "--config",
        metavar="YAML",
        help="start from a recipe (recipes/eval/*.yaml); flags given here override it",
    )
    # one flag per EvalConfig field, its help the field's doc comment
    add_flags(p, EvalConfig, negations={"save_trace": "--no-trace"})
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def config_from_args(args: argparse.Namespace):
    from chunkwise.config import load_config
    from chunkwise.config.flags import flag_overrides
    from chunkwise.errors import BadInput
    from chunkwise.eval.config import EvalConfig

    cfg = load_config(EvalConfig, args.config, flag_overrides(args, EvalConfig))
    if not args.config and args.output is None:
        raise BadInput("--output is required (the run folder, e.g. runs/NAME)")
    return cfg


def run(args: argparse.Namespace) -> int:
    from chunkwise.eval.runner import run_eval

    cfg = config_from_args(args)
    if cfg.lengths and cfg.checkpoints:
        from chunkwise.errors import BadInput

        raise BadInput("--lengths and --checkpoints are two sweeps; run one of them at a time")
    if cfg.plan:
        from chunkwise.eval.plan import print_plan

        print_plan(cfg, progress=not args.no_progress)
        return 0
    if cfg.lengths:
        return _run_lengths(cfg, progress=not args.no_progress)
    if cfg.checkpoints:
        return _run_checkpoints(cfg, progress=not args.no_progress)
    results = run_eval(cfg, progress=not args.no_progress)
    assert results is not None
    summary = {
        "output": cfg.output,
        "results": str(Path(cfg.output) / results["files"]["results"]),
        "scores": {t: r["score"] for t, r in results["results"].items()},
        "stderr": {t: r["score_stderr"] for t, r in results["results"].items()},
        "average": results["average"]["score"],
        "n": {t: r["n"] for t, r in results["results"].items()},
    }
    print(json.dumps(summary, ensure_ascii=False))
    return 0


def _run_checkpoints(cfg, *, progress: bool) -> int:
    """``--checkpoints``: the sweep over a training run, then the average score per point."""
    from chunkwise.eval.checkpoint_sweep import run_checkpoint_sweep

    report = run_checkpoint_sweep(cfg, progress=progress)
    summary = {
        "output": cfg.output,
        "curve_json": str(Path(cfg.output) / report["files"]["json"]),
        "scores": {
            task: {p["run"]: p["score"] for p in line} for task, line in report["curves"].items()
        },
    }
    print(json.dumps(summary, ensure_ascii=False))
    return 0


def _run_lengths(cfg, *, progress: bool) -> int:
    """``--lengths``: the sweep, then a one-line summary (the effective lengths)."""
    from chunkwise.eval.lengths import run_lengths

    report = run_lengths(cfg, progress=progress)
    strategy = report["strategy"]
    summary = {
        "output": cfg.output,
        "lengths_json": str(Path(cfg.output) / report["files"]["json"]),
        "scores": {
            task: {str(p["length"]): p["score"] for p in line}
            for task, line in report["curves"][strategy].items()
        },
        "effective_length": {
            task: {name: e["length"] for name, e in rules.items()}
            for task, rules in report["effective_length"][strategy].items()
        },
    }
    print(json.dumps(summary, ensure_ascii=False))
    return 0
