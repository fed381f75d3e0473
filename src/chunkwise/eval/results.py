"""results.json: scores with their uncertainty, and everything needed to trust or redo them.

The layout follows lm-evaluation-harness where it has a key for a thing (``results[task]``
with ``"score,none"`` and ``"score_stderr,none"``, ``higher_is_better``, ``n-samples``,
``configs``, ``task_hashes``, ``versions``, ``git_hash``, ``date``) and adds what an
InfiniteBench-style run needs: a 95% bootstrap interval per task, the scorer and extractor, the
prompt templates used (ours, or the official file, family and hash), the model's provenance
(absolute checkpoint path, base model, weights hash), per-strategy stats and timings.

Rescoring a finished run with another scorer or extractor writes
``results_<scorer>_<extract>.json`` beside ``results.json`` instead of replacing it.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import platform
import subprocess
from pathlib import Path
from typing import Any

from chunkwise.io import JSONInputError, parse_json
from chunkwise.stats import BOOTSTRAP_ROUNDS, bootstrap_means, percentile_interval

#: stats summed over examples in results.json
STAT_KEYS = ("llm_calls", "prompt_tokens", "completion_tokens", "seconds")
#: summed too when a strategy reports them (summary trees: nodes built, seconds building)
OPTIONAL_STAT_KEYS = ("summary_nodes", "build_seconds")
#: per-kind counters (``{"toc": 1, "summarize": 4, ...}``) summed key by key when present
KIND_STAT_KEYS = ("llm_calls_by_kind", "tokens_by_kind")
FLOAT_STAT_KEYS = frozenset({"seconds", "build_seconds"})


# --------------------------------------------------------------------------------------------
# uncertainty


def bootstrap(scores: list[float], seed: int = 0, rounds: int = BOOTSTRAP_ROUNDS) -> dict:
    """Mean, bootstrap standard error and 95% percentile interval of per-example scores, all in
    percent (``rounds`` resamples of the examples with replacement, :mod:`chunkwise.stats`)."""
    import numpy as np

    x = np.asarray(scores, dtype=float) * 100.0
    n = len(x)
    mean = float(x.mean()) if n else 0.0
    if n < 2:
        return {"mean": mean, "stderr": 0.0, "ci95": [mean, mean], "rounds": 0}
    means = bootstrap_means(x, rounds=rounds, seed=seed)
    return {
        "mean": mean,
        "stderr": float(means.std(ddof=1)),
        "ci95": list(percentile_interval(means)),
        "rounds": rounds,
    }


def task_block(
    alias: str, scores: list[float], errors: int, scorer: str, extract: str, seed: int
) -> dict[str, Any]:
    b = bootstrap(scores, seed)
    score, se = round(b["mean"], 4), round(b["stderr"], 4)
    return {
        "alias": alias,
        "score": score,
        "score_stderr": se,
        "score_ci95": [round(v, 4) for v in b["ci95"]],
        "score,none": score,
        "score_stderr,none": se,
        "n": len(scores),
        "errors": errors,
        "scorer": scorer,
        "extract": extract,
        "bootstrap_rounds": b["rounds"],
    }


def average_block(per_task: dict[str, dict[str, Any]], tasks: list[str]) -> dict[str, Any]:
    """The unweighted mean over tasks; its stderr from the tasks' (independent) stderrs."""
    k = len(tasks)
    score = sum(per_task[t]["score"] for t in tasks) / k
    se = (sum(per_task[t]["score_stderr"] ** 2 for t in tasks) ** 0.5) / k
    return {
        "score": round(score, 4),
        "score_stderr": round(se, 4),
        "score_ci95": [round(score - 1.96 * se, 4), round(score + 1.96 * se, 4)],
        "tasks": list(tasks),
    }


def sha256_of(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------------------------
# which file


def results_path(out: Path, scorer: str, extract: str) -> Path:
    """``results.json``, unless it holds another scoring of this run: then a file of its own."""
    main = out / "results.json"
    if not main.is_file():
        return main
    try:
        old = parse_json(main.read_bytes())
        same = all(
            r.get("scorer") == scorer and r.get("extract") == extract
            for r in old["results"].values()
        )
    except (JSONInputError, OSError, KeyError, TypeError, AttributeError):
        return main  # unreadable: replaced
    return main if same else out / f"results_{scorer}_{extract}.json"


def samples_dir(results_file: Path) -> Path:
    stem = results_file.stem  # results | results_<scorer>_<extract>
    suffix = stem[len("results") :]
    return results_file.parent / f"samples{suffix}"


# --------------------------------------------------------------------------------------------
# strategy stats


def stat_sums(per_example: list[dict[str, Any]]) -> dict[str, Any]:
    """Sums of the always-present stats, of the optional ones some example has, and of the
    per-kind counters (key by key)."""
    sums: dict[str, Any] = {
        k: sum(float(st.get(k, 0) or 0) for st in per_example) for k in STAT_KEYS
    }
    for k in OPTIONAL_STAT_KEYS:
        if any(k in st for st in per_example):
            sums[k] = sum(float(st.get(k, 0) or 0) for st in per_example)
    for k in KIND_STAT_KEYS:
        kinds: dict[str, int] = {}
        for st in per_example:
            for kind, count in (st.get(k) or {}).items():
                kinds[kind] = kinds.get(kind, 0) + int(count or 0)
        if kinds:
            sums[k] = kinds
    return sums


def stat_block(sums: dict[str, Any], n: int) -> dict[str, Any]:
    block: dict[str, Any] = {}
    per_example: dict[str, Any] = {}
    for k, v in sums.items():
        if isinstance(v, dict):
            block[k] = dict(v)
            per_example[k] = {kind: round(c / n, 3) if n else 0.0 for kind, c in v.items()}
        else:
            block[k] = round(v, 3) if k in FLOAT_STAT_KEYS else int(v)
            per_example[k] = round(v / n, 3) if n else 0.0
    block["tokens"] = int(sums["prompt_tokens"] + sums["completion_tokens"])
    per_example["tokens"] = round(block["tokens"] / n, 3) if n else 0.0
    block["examples"] = n
    block["per_example"] = per_example
    return block


# --------------------------------------------------------------------------------------------
# environment


def versions() -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in (
        "chunkwise",
        "torch",
        "transformers",
        "accelerate",
        "peft",
        "datasets",
        "rouge-score",
        "wandb",
        "vllm",
    ):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def git_info() -> dict[str, Any]:
    """The commit of the chunkwise checkout this runs from (None when not a git checkout)."""
    root = Path(__file__).resolve().parents[3]
    info: dict[str, Any] = {"git_hash": None, "git_dirty": None}
    if not (root / ".git").exists():
        return info
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return info
    return {"git_hash": sha or None, "git_dirty": bool(dirty)}


def now() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


__all__ = [
    "average_block",
    "bootstrap",
    "git_info",
    "now",
    "results_path",
    "samples_dir",
    "sha256_of",
    "stat_block",
    "stat_sums",
    "task_block",
    "versions",
]
