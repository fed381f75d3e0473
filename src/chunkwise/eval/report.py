"""A finished run's predictions -> results.json and the per-sample files.

What the report reads of a run is a :class:`RunContext`, which the runner builds. Every
prediction is scored with the run's scorer and extractor (the raw output when the benchmark
says the extractor reads raw text), each task gets its bootstrap interval, config and config hash, and
the whole is assembled in lm-eval's layout (:mod:`.results`). A fresh run in which every
example failed is refused here, and what it wrote is removed, so that the corrected command
can use the same folder.
"""

from __future__ import annotations

import json
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chunkwise.benchmarks import Benchmark, Templates
from chunkwise.errors import BadInput
from chunkwise.eval.config import EvalConfig
from chunkwise.eval.results import (
    STAT_KEYS,
    average_block,
    git_info,
    now,
    results_path,
    samples_dir,
    sha256_of,
    stat_block,
    stat_sums,
    task_block,
    versions,
)
from chunkwise.eval.run_dir import main_file, merge, read_records, stored_config, write_config
from chunkwise.io import atomic_write_text


@dataclass(frozen=True)
class RunContext:
    """What the report needs to know of a run, built by the runner once the model is known."""

    #: the run's resolved config (scorer, seed, strategy, what results.json records)
    cfg: EvalConfig
    #: the benchmark whose scorer, extractors and task configs the report uses
    bench: Benchmark
    #: the extractor in use (``auto`` already resolved by the benchmark)
    extract: str
    #: the prompts asked for: chat | base
    kind: str
    #: the run folder
    out: Path
    #: how many ranks answered (each wrote its own shard)
    world_size: int = 1
    #: the official templates (``--prompt-source``) as the benchmark loaded them; None: ours
    templates: Templates | None = None


def score_record(run: RunContext, task: str, rec: dict[str, Any]) -> tuple[str, float]:
    """(the extracted text, its score in [0, 1]) for a prediction line."""
    text = rec["prediction"]
    if run.bench.reads_raw(run.extract) and isinstance(rec.get("raw_output"), str):
        text = rec["raw_output"]
    score = run.bench.score(task, text, rec["ground_truth"], run.cfg.scorer, run.extract)
    return run.bench.extracted(task, text, run.extract), float(score)


# --------------------------------------------------------------------------------------------
# merge, score, results


def _templates_info(run: RunContext) -> dict[str, Any]:
    if run.templates is not None:
        return {"kind": "official", **run.templates.describe()}
    return {"kind": "chunkwise", "version": run.bench.prompt_version()}


def _task_config(run: RunContext, task: str, source: Any) -> dict[str, Any]:
    cfg = run.cfg
    prompt = (
        run.bench.task_config(task, run.kind, run.templates)
        if run.bench.task_config is not None
        else {"version": run.bench.prompt_version()}
    )
    return {
        "benchmark": run.bench.name,
        "task": task,
        "data": source,
        "limit": cfg.limit,
        "scorer": cfg.scorer,
        "extract": run.extract,
        "strategy": cfg.strategy,
        "strategy_args": dict(cfg.strategy_args),
        "context_window": cfg.context_window,
        "truncation": cfg.truncation,
        "prompt": prompt,
    }


def _clear_failed_run(out: Path, tasks: list[str]) -> None:
    """Remove what this session wrote when it produced nothing but failures (a fresh run):
    the corrected command can then use the same folder."""
    for task in tasks:
        main_file(out, task).unlink(missing_ok=True)
    shards = out / "predictions" / "shards"
    if shards.is_dir():
        shutil.rmtree(shards)
    for p in (out / "predictions", out):
        if p.is_dir() and not any(p.iterdir()):
            p.rmdir()
    (out / "config.yaml").unlink(missing_ok=True)
    if out.is_dir() and not any(out.iterdir()):
        out.rmdir()


def finish(
    run: RunContext,
    tasks: list[str],
    examples: dict[str, list[dict]],
    sources: dict[str, Any],
    totals: dict[str, int],
    model_info: dict[str, Any],
    resumed: bool,
) -> dict[str, Any]:
    cfg, bench, out = run.cfg, run.bench, run.out
    per_task: dict[str, Any] = {}
    stats: dict[str, Any] = {}
    shards: dict[str, Any] = {}
    configs: dict[str, Any] = {}
    prompt_versions: set[str] = set()
    every_example: list[dict[str, Any]] = []
    scored: dict[str, list[tuple[dict[str, Any], str, float]]] = {}
    audits: dict[str, Any] = {}
    for task in tasks:
        records, counts = merge(out, task, [ex["id"] for ex in examples[task]])
        if counts:
            shards[task] = counts
        scored[task] = [(r, *score_record(run, task, r)) for r in records]
        if cfg.audit:
            audits[task] = _audit(run, task, scored[task], examples[task])
        per_task[task] = task_block(
            bench.display.get(task, task),
            [sc for _, _, sc in scored[task]],
            sum(1 for r in records if r.get("error")),
            cfg.scorer,
            run.extract,
            cfg.seed,
        )
        configs[task] = _task_config(run, task, sources[task])
        per_example = [r.get("stats") or {} for r in records]
        every_example.extend(per_example)
        stats[task] = stat_block(stat_sums(per_example), len(records))
        for r in records:
            v = r.get("stats", {}).get("prompt_version")
            if v:
                prompt_versions.add(str(v))
    n_all = sum(per_task[t]["n"] for t in tasks)
    failed = [r for t in tasks for r, _, _ in scored[t] if r.get("error")]
    if failed and len(failed) == n_all:
        if not resumed:
            _clear_failed_run(out, tasks)
        raise BadInput(
            f"every one of the {n_all} examples failed, so nothing was scored; the first "
            f"error ({failed[0]['id']!r}): {failed[0]['error']}"
        )
    write_config(out, cfg)  # refresh the keys a rerun may change (scorer, extract, wandb)
    path = results_path(out, cfg.scorer, run.extract)
    files: dict[str, Any] = {"results": path.name, "samples": None}
    if cfg.log_samples:
        folder = samples_dir(path)
        for task in tasks:
            atomic_write_text(folder / f"{task}.jsonl", _samples_text(run, scored[task]))
        files["samples"] = folder.name
    stats["all"] = stat_block(stat_sums(every_example), len(every_example))
    extra = {"audit": audits} if cfg.audit else {}
    return {
        "results": per_task,
        "average": average_block(per_task, tasks),
        "higher_is_better": {t: {"score": True} for t in tasks},
        "n-samples": {t: {"original": totals[t], "effective": per_task[t]["n"]} for t in tasks},
        "configs": configs,
        "task_hashes": {t: sha256_of(configs[t]) for t in tasks},
        "templates": _templates_info(run),
        "strategy_stats": stats,
        "data": sources,
        "config": stored_config(cfg),
        "benchmark": {"name": bench.name, "prompt_version": bench.prompt_version()},
        "strategy": {
            "name": cfg.strategy,
            "args": dict(cfg.strategy_args),
            "prompt_versions": sorted(prompt_versions),
        },
        "model": model_info,
        "distributed": {"world_size": run.world_size, "shard_lines": shards},
        "files": files,
        "versions": versions(),
        **git_info(),
        "date": now(),
        "platform": platform.platform(),
        **extra,
    }


def _audit(
    run: RunContext,
    task: str,
    scored: list[tuple[dict[str, Any], str, float]],
    examples: list[dict[str, Any]],
) -> dict[str, Any]:
    """The task's funnel (:mod:`.audit.saved`); saved lines audited now are written back."""
    from chunkwise.eval.audit.saved import audit_task

    evidence = {ex["id"]: ex["evidence"] for ex in examples if "evidence" in ex}
    block, changed = audit_task(run.cfg.strategy, scored, evidence)
    if changed:
        lines = [
            json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r, _, _ in scored
        ]
        atomic_write_text(main_file(run.out, task), "".join(lines))
    return block


def _samples_text(run: RunContext, scored: list[tuple[dict[str, Any], str, float]]) -> str:
    rows = []
    for r, extracted, score in scored:
        row = {
            "id": r["id"],
            "prompt": r.get("prompt"),
            "raw_output": r.get("raw_output"),
            "prediction": r["prediction"],
            "extracted": extracted,
            "ground_truth": r["ground_truth"],
            "score": score,
            "scorer": run.cfg.scorer,
            "extract": run.extract,
        }
        if r.get("error"):
            row["error"] = r["error"]
        rows.append(json.dumps(row, ensure_ascii=False) + "\n")
    return "".join(rows)


def wandb_samples(run: RunContext, tasks: list[str]) -> dict[str, list]:
    """Per-sample rows for wandb: id, question, prediction, extracted, reference, score, stats."""
    rows: dict[str, list] = {}
    for task in tasks:
        rows[task] = []
        for r in read_records(main_file(run.out, task)):
            st = r.get("stats", {})
            extracted, score = score_record(run, task, r)
            rows[task].append(
                {
                    "id": r["id"],
                    "question": r.get("question", ""),
                    "prediction": r["prediction"],
                    "extracted": extracted,
                    "reference": r["ground_truth"],
                    "score": score,
                    **{k: st.get(k, 0) for k in STAT_KEYS},
                }
            )
    return rows


__all__ = ["RunContext", "finish", "score_record", "wandb_samples"]
