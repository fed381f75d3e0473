"""Log an evaluation to Weights & Biases: resolved config, metrics, a per-sample table, and
results.json as an artifact (type ``eval_results``, as lm-evaluation-harness logs it).

``wandb_entity`` and ``wandb_tags`` go to ``wandb.init``; ``wandb_step`` is the step the metrics
are logged at (a checkpoint's training step, so evals of several checkpoints line up).

Offline unless the user says otherwise: ``WANDB_MODE`` defaults to ``offline`` here, so runs land
in ``<run folder>/wandb/offline-run-*`` and can be pushed later with ``wandb sync``. Set
``WANDB_MODE=online`` yourself to log live. Metric names are stable: ``eval/<task>/<metric>``
(score, n, errors and the per-example strategy stats) and ``eval/average/score``; with
``--audit``, each outcome's count ``eval/<task>/audit/<outcome>`` and the funnels as a table
``eval/audit_funnel``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from chunkwise.errors import MissingDependency

SAMPLE_COLUMNS = (
    "task",
    "id",
    "question",
    "prediction",
    "extracted",
    "reference",
    "score",
    "llm_calls",
    "prompt_tokens",
    "completion_tokens",
    "seconds",
)


def metrics_of(results: dict[str, Any]) -> dict[str, float]:
    """``eval/<task>/<metric>`` for every task, plus the average."""
    out: dict[str, float] = {}
    for task, r in results["results"].items():
        for key in ("score", "n", "errors"):
            out[f"eval/{task}/{key}"] = r[key]
        per = results.get("strategy_stats", {}).get(task, {}).get("per_example", {})
        for key, value in per.items():
            if isinstance(value, dict):  # per-kind counters: one metric per kind
                for kind, v in value.items():
                    out[f"eval/{task}/{key}/{kind}_per_example"] = v
            else:
                out[f"eval/{task}/{key}_per_example"] = value
    out["eval/average/score"] = results["average"]["score"]
    for task, block in (results.get("audit") or {}).items():  # the evidence audit's funnel
        for outcome, count in block["funnel"].items():
            out[f"eval/{task}/audit/{outcome}"] = count
    return out


def funnel_rows(results: dict[str, Any]) -> list[list[Any]]:
    """The evidence audit's funnels as rows (task, outcome, count, share of n)."""
    rows = []
    for task, block in (results.get("audit") or {}).items():
        n = block["n"]
        for outcome, count in block["funnel"].items():
            rows.append([task, outcome, count, count / n if n else 0.0])
    return rows


def _cell(value: Any) -> Any:
    if isinstance(value, (str, int, float)) or value is None:
        return value
    return json.dumps(value, ensure_ascii=False)


def log_eval(
    run_dir: str | Path,
    results: dict[str, Any],
    samples: dict[str, list[dict]],
    *,
    results_file: str | Path | None = None,
) -> Path | None:
    """Log one evaluation; returns the wandb run's local folder (None when disabled).

    Inside an active wandb run (e.g. evaluation called from training) the eval is logged
    into that run; otherwise a run of its own is started in ``<run_dir>/wandb`` and closed.
    """
    # passed explicitly too: wandb ignores environment changes once a session has started
    mode = os.environ.setdefault("WANDB_MODE", "offline")
    try:
        import wandb
    except ImportError:
        raise MissingDependency(
            "wandb", "pip install 'chunkwise[eval]' (or pip install wandb)"
        ) from None
    run_dir = Path(run_dir)
    cfg = results["config"]
    config = {
        **cfg,
        "data_sources": results.get("data"),
        "model_info": results.get("model"),
        "benchmark_info": results.get("benchmark"),
        "strategy_info": results.get("strategy"),
        "versions": results.get("versions"),
        "git_hash": results.get("git_hash"),
        "git_dirty": results.get("git_dirty"),
    }
    own = wandb.run is None
    if own:
        run = wandb.init(
            project=cfg.get("wandb_project") or "chunkwise-eval",
            entity=cfg.get("wandb_entity") or None,
            name=run_dir.name,
            group=cfg.get("wandb_group") or None,
            dir=str(run_dir),
            config=config,
            job_type="eval",
            mode=mode,
            tags=list(
                dict.fromkeys([cfg["strategy"], cfg["benchmark"], *cfg.get("wandb_tags", [])])
            ),
        )
    else:
        run = wandb.run
        run.config.update({"eval": config}, allow_val_change=True)
    step = cfg.get("wandb_step")
    at = {"step": int(step)} if step is not None else {}
    try:
        metrics = metrics_of(results)
        run.log(metrics, **at)
        run.summary.update(metrics)
        table = wandb.Table(columns=list(SAMPLE_COLUMNS))
        for task, rows in samples.items():
            for row in rows:
                table.add_data(
                    *[_cell(task if c == "task" else row.get(c)) for c in SAMPLE_COLUMNS]
                )
        run.log({"eval/samples": table}, **at)
        if results.get("audit"):
            funnel = wandb.Table(columns=["task", "outcome", "count", "share"])
            for row in funnel_rows(results):
                funnel.add_data(*row)
            run.log({"eval/audit_funnel": funnel}, **at)
        if results_file is not None and Path(results_file).is_file():
            artifact = wandb.Artifact(
                f"results-{_artifact_name(run_dir.name)}", type="eval_results"
            )
            artifact.add_file(str(results_file), name="results.json")
            run.log_artifact(artifact)
        folder = Path(run.dir).parent if getattr(run, "dir", None) else None
    finally:
        if own:
            run.finish()
            # finish() can return before the offline log is on disk; shutting the service
            # down flushes it (only done when the run was ours, so no other run is cut off)
            wandb.teardown()
    return folder


def _artifact_name(name: str) -> str:
    """wandb artifact names take letters, digits, '-', '_' and '.'."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name) or "eval"


__all__ = ["SAMPLE_COLUMNS", "funnel_rows", "log_eval", "metrics_of"]
