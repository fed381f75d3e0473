"""The evaluation runner: one model, one strategy (decoding mode), a benchmark's tasks.

``run_eval(config)`` writes a run folder::

    runs/NAME/config.yaml                  the resolved EvalConfig (a valid recipe)
    runs/NAME/predictions/<task>.jsonl     {id, prediction, ground_truth, strategy, model,
                                            question, stats, trace?[, error]}
    runs/NAME/results.json                 scores per task, strategy stats, data sources,
                                            versions, git sha, timings (lm-eval's layout)

Any registered strategy is a decoding mode: the runner builds it from its name and options and
calls ``answer(document, query, llm)``; nothing here knows one strategy from another.

Resuming: every prediction is appended and fsynced as soon as it exists, so rerunning the same
command skips the ids already written. A run folder whose config.yaml differs from the new
config (in anything but where it is written, how it is scored, or wandb) is refused.

Data parallel: with ``Dist(rank, world)`` each rank answers examples ``rank::world`` into its own
``predictions/shards/<task>.rank<r>.jsonl``; after a barrier rank 0 merges the shards into
``predictions/<task>.jsonl`` (in data order, each id once) and scores.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import logging
import platform
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunkwise.config import config_to_dict, dump_yaml, load_config
from chunkwise.errors import BadInput, ChunkwiseError, LLMRequestError, MissingDependency
from chunkwise.eval.benchmarks import Benchmark, get_benchmark
from chunkwise.eval.distributed import Dist
from chunkwise.io import JsonlAppender, atomic_write_json, atomic_write_text

log = logging.getLogger(__name__)

PROMPT_KINDS = ("auto", "chat", "base")

#: config keys that may change between sessions of one run: they do not change any prediction
RESUME_EXEMPT = frozenset({"output", "scorer", "extract", "wandb", "wandb_project"})

#: stats summed over examples in results.json
STAT_KEYS = ("llm_calls", "prompt_tokens", "completion_tokens", "seconds")
#: summed too when a strategy reports them (summary trees: nodes built, seconds building)
OPTIONAL_STAT_KEYS = ("summary_nodes", "build_seconds")
#: per-kind counters (``{"toc": 1, "summarize": 4, ...}``) summed key by key when present
KIND_STAT_KEYS = ("llm_calls_by_kind", "tokens_by_kind")
FLOAT_STAT_KEYS = frozenset({"seconds", "build_seconds"})


@dataclass
class EvalConfig:
    """One evaluation: a recipe under ``recipes/eval/`` or the flags of ``chunkwise eval``."""

    #: model spec (``hf:default``, ``openai:M@URL``, a training output folder, ...)
    model: str = "hf:default"
    #: any registered strategy: standard, mapreduce, ...
    strategy: str = "standard"
    #: the strategy's options (``chunk_tokens: 1000``); values are kept as text
    strategy_args: dict[str, Any] = field(default_factory=dict)
    benchmark: str = "infinitebench"
    tasks: list[str] = field(default_factory=lambda: ["passkey"])
    #: hub | a folder of official <task>.jsonl files | synthetic:LENGTH
    data: str = "hub"
    #: Hub dataset revision (default: the benchmark's pinned one)
    revision: str | None = None
    #: first N examples of each task (synthetic: generate N)
    limit: int | None = None
    #: synthetic data seed
    seed: int = 0
    #: cap on the context window the strategy may use (below the model's own)
    context_window: int | None = None
    #: question wording: auto (chat when the model takes chat messages) | chat | base
    prompts: str = "auto"
    scorer: str = "official"
    extract: str = "none"
    output: str = "runs/eval"
    #: keep each strategy trace (every LLM call) in the prediction lines
    save_trace: bool = True
    wandb: bool = False
    wandb_project: str = "chunkwise-eval"

    def resolved(self) -> EvalConfig:
        """A checked copy: tasks split on commas, options as text, the Hub revision pinned."""
        tasks: list[str] = []
        for t in self.tasks:
            tasks.extend(p.strip() for p in str(t).split(",") if p.strip())
        args = {str(k): _option_text(v) for k, v in (self.strategy_args or {}).items()}
        if "window" in args:
            raise BadInput(
                "set the window with --context-window (config key context_window), "
                "not as a strategy option"
            )
        if self.prompts not in PROMPT_KINDS:
            raise BadInput(f"prompts={self.prompts!r}; valid: {', '.join(PROMPT_KINDS)}")
        if self.limit is not None and self.limit < 1:
            raise BadInput(f"limit must be at least 1, got {self.limit}")
        if self.context_window is not None and self.context_window < 1:
            raise BadInput(f"context_window must be positive, got {self.context_window}")
        if not str(self.output).strip():
            raise BadInput("output (the run folder) is empty")
        revision = self.revision
        if self.data.strip() == "hub" and revision is None and self.benchmark == "infinitebench":
            from chunkwise.data.infinitebench import HUB_REVISION

            revision = HUB_REVISION
        return dataclasses.replace(
            self, tasks=tasks, strategy_args=args, revision=revision, data=self.data.strip()
        )


def _option_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


# --------------------------------------------------------------------------------------------
# run folder


def _config_diffs(path: Path, cfg: EvalConfig) -> list[str]:
    try:
        old = load_config(EvalConfig, path).resolved()
    except ChunkwiseError as e:
        return [f"its config cannot be read ({e})"]
    a, b = config_to_dict(old), config_to_dict(cfg)
    return [
        f"{k}: {a.get(k)!r} -> {b.get(k)!r}"
        for k in dict.fromkeys([*a, *b])
        if k not in RESUME_EXEMPT and a.get(k) != b.get(k)
    ]


def prepare_run_dir(out: Path, cfg: EvalConfig, dist: Dist) -> bool:
    """Check and write ``config.yaml``. Returns whether an earlier run is resumed."""
    if out.exists() and not out.is_dir():
        raise BadInput(f"--output {out} is a file; give a folder for the run")
    cfg_path = out / "config.yaml"
    resuming = cfg_path.exists()
    if resuming:
        diffs = _config_diffs(cfg_path, cfg)
        if diffs:
            raise BadInput(
                f"{out} holds a run made with a different config, so it cannot be resumed; "
                f"differences (in config.yaml -> now): {'; '.join(diffs)}. Rerun with the "
                "original settings, or pass a new --output"
            )
    elif any((out / "predictions").rglob("*.jsonl")):
        raise BadInput(
            f"{out}/predictions holds files but {cfg_path} is missing, so it is not known how "
            "they were made; pass a new --output"
        )
    # every rank writes the same text atomically, so no rank's shard can precede config.yaml;
    # a rerun refreshes the keys that may change (scorer, extract, wandb)
    dump_yaml(cfg, cfg_path)
    return resuming


def _main_file(out: Path, task: str) -> Path:
    return out / "predictions" / f"{task}.jsonl"


def _shard_files(out: Path, task: str) -> list[Path]:
    return sorted((out / "predictions" / "shards").glob(f"{task}.rank*.jsonl"))


def _read_records(path: Path) -> list[dict[str, Any]]:
    """Records of a predictions file that another process may still be appending to: an
    unfinished last line is ignored (a complete record without its newline is kept)."""
    if not path.exists():
        return []
    out = []
    with path.open("rb") as f:
        lines = f.read().split(b"\n")
    for lineno, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw.decode("utf-8"))
        except ValueError:
            if lineno == len(lines):  # the unfinished tail of a live or killed writer
                continue
            raise BadInput(f"{path}:{lineno}: not valid JSON; fix or delete that line") from None
        if not isinstance(rec, dict) or "id" not in rec:
            raise BadInput(f"{path}:{lineno}: expected a JSON object with an 'id'")
        out.append(rec)
    return out


def _show_ids(ids: Iterable[Any], limit: int = 10) -> str:
    ids = list(ids)
    text = ", ".join(repr(i) for i in ids[:limit])
    return text + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


# --------------------------------------------------------------------------------------------
# the run


def make_strategy(cfg: EvalConfig):
    from chunkwise.strategies import get_strategy

    kwargs: dict[str, Any] = dict(cfg.strategy_args)
    if cfg.context_window is not None:
        kwargs["window"] = cfg.context_window
    return get_strategy(cfg.strategy, **kwargs)


@dataclass
class _Session:
    cfg: EvalConfig
    bench: Benchmark
    strategy: Any
    llm: Any
    kind: str
    window: int
    dist: Dist
    out: Path
    progress: bool


def run_eval(
    cfg: EvalConfig, *, dist: Dist | None = None, llm: Any = None, progress: bool = True
) -> dict[str, Any] | None:
    """Evaluate; returns results.json's content on rank 0 (None on other ranks).

    ``llm``: an already loaded model (it is then neither loaded nor closed here).
    """
    t_start = time.perf_counter()
    dist = dist or Dist()
    cfg = cfg.resolved()
    bench = get_benchmark(cfg.benchmark)
    tasks = bench.check_tasks(cfg.tasks)
    bench.check_scoring(cfg.scorer, cfg.extract)
    strategy = make_strategy(cfg)
    data_spec = bench.parse_data(cfg.data)
    if llm is None:
        from chunkwise.llm import parse_spec

        parse_spec(cfg.model)  # a malformed spec fails before anything is written
    out = Path(cfg.output)
    resumed = prepare_run_dir(out, cfg, dist)

    own_llm = llm is None
    t0 = time.perf_counter()
    if own_llm:
        from chunkwise.llm import load_llm

        llm = load_llm(cfg.model)
    load_s = time.perf_counter() - t0
    sources: dict[str, Any] = {}
    totals: dict[str, int] = {}
    examples: dict[str, list[dict[str, Any]]] = {}
    try:
        kind = cfg.prompts if cfg.prompts != "auto" else ("chat" if llm.chat else "base")
        window = strategy.effective_window(llm)
        s = _Session(cfg, bench, strategy, llm, kind, window, dist, out, progress)
        for task in tasks:
            td = bench.load(
                task,
                data_spec,
                limit=cfg.limit,
                revision=cfg.revision,
                seed=cfg.seed,
                count_tokens=llm.count_tokens,
            )
            if not td.examples:
                raise BadInput(f"{task}: the data has no examples")
            sources[task], totals[task] = td.source, td.total
            # keep only what scoring needs: contexts can be hundreds of MB per task
            examples[task] = [{"id": ex["id"]} for ex in td.examples]
            _generate(s, task, td.examples)
            del td
        model_info = {
            "spec": cfg.model,
            "context_window": llm.context_window,
            "chat": bool(llm.chat),
            "prompt_kind": kind,
            "strategy_window": window,
        }
    finally:
        if own_llm:
            llm.close()
    dist.barrier()  # every rank's shard is complete
    if not dist.is_main:
        return None
    results = _finish(cfg, bench, tasks, examples, sources, totals, out, dist, model_info)
    results["timing"] = {
        "model_load_seconds": round(load_s, 3),
        "session_seconds": round(time.perf_counter() - t_start, 3),
        "generation_seconds_all_sessions": round(
            sum(results["strategy_stats"][t]["seconds"] for t in tasks), 3
        ),
        "resumed": resumed,
    }
    atomic_write_json(out / "results.json", results)
    if cfg.wandb:
        from chunkwise.eval.wandb_log import log_eval

        log_eval(out, results, _samples(cfg, bench, tasks, out))
    return results


def _generate(s: _Session, task: str, examples: list[dict[str, Any]]) -> None:
    from tqdm import tqdm

    out, dist = s.out, s.dist
    valid = {ex["id"] for ex in examples}
    mine = (
        _main_file(out, task)
        if dist.world == 1
        else out / "predictions" / "shards" / f"{task}.rank{dist.rank}.jsonl"
    )
    with JsonlAppender(mine) as app:
        done = set(app.done)
        for path in [_main_file(out, task), *_shard_files(out, task)]:
            if path != mine:
                done.update(r["id"] for r in _read_records(path))
        unknown = [i for i in done if i not in valid]
        if unknown:
            raise BadInput(
                f"{out}/predictions holds {task} predictions for ids that are not in the data: "
                f"{_show_ids(unknown)}. The data changed since this run began; pass a new "
                "--output (or delete those lines)"
            )
        my = examples[dist.rank :: dist.world]
        todo = [ex for ex in my if ex["id"] not in done]
        where = f" [rank {dist.rank}/{dist.world}]" if dist.world > 1 else ""
        bar = tqdm(
            total=len(my),
            initial=len(my) - len(todo),
            desc=f"{task}{where}",
            unit="ex",
            position=dist.rank,
            disable=not s.progress,
            dynamic_ncols=True,
        )
        got, n = 0.0, 0
        with bar:
            for ex in todo:
                rec = _predict(s, task, ex)
                app.write(rec)
                got += s.bench.score(
                    task, rec["prediction"], rec["ground_truth"], s.cfg.scorer, s.cfg.extract
                )
                n += 1
                bar.set_postfix(score=f"{100 * got / n:.1f}", refresh=False)
                bar.update(1)
        if todo:
            log.info(
                "%s%s: %d new predictions (%d were done)",
                task,
                where,
                len(todo),
                len(my) - len(todo),
            )


def _predict(s: _Session, task: str, ex: dict[str, Any]) -> dict[str, Any]:
    cfg = s.cfg
    question, error, text, stats, trace = "", None, "", {}, []
    try:
        query = s.bench.build_query(task, ex, s.kind, s.window)
        question = query.render()
        ans = s.strategy.answer(ex["context"], query, s.llm)
        text, stats = ans.text, ans.stats.to_dict()
        trace = [e.to_dict() for e in ans.trace]
    except (LLMRequestError, MissingDependency):
        raise  # the model is unreachable or broken: stop; a rerun resumes here
    except ChunkwiseError as e:  # this example cannot be answered (e.g. collapse did not fit)
        log.warning("%s id %r: %s", task, ex["id"], e)
        error = str(e)
    rec: dict[str, Any] = {
        "id": ex["id"],
        "prediction": text,
        "ground_truth": ex["answer"],
        "strategy": cfg.strategy,
        "model": cfg.model,
        "question": question,
        "stats": stats,
    }
    if error is not None:
        rec["error"] = error
    if cfg.save_trace:
        rec["trace"] = trace
    return rec


# --------------------------------------------------------------------------------------------
# merge, score, results


def _merge(out: Path, task: str, ids: list[Any]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """All of a task's predictions in data order, each id once, in ``predictions/<task>.jsonl``."""
    main = _main_file(out, task)
    shards = _shard_files(out, task)
    by_id: dict[Any, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for path in [main, *shards]:
        recs = _read_records(path)
        if path != main:
            counts[path.stem.rsplit(".", 1)[-1]] = len(recs)
        for r in recs:
            by_id.setdefault(
                r["id"], r
            )  # a repeat (a merge interrupted before cleanup) is the same
    order = {i: k for k, i in enumerate(ids)}
    extra = [i for i in by_id if i not in order]
    if extra:
        raise BadInput(f"{task}: predictions for ids not in the data: {_show_ids(extra)}")
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise BadInput(
            f"{task}: no prediction for ids {_show_ids(missing)} after every rank finished; "
            "rerun the same command to fill them in"
        )
    records = [by_id[i] for i in ids]
    current = _read_records(main)
    if shards or [r["id"] for r in current] != ids:
        text = "".join(
            json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records
        )
        atomic_write_text(main, text)
        for p in shards:
            p.unlink()
        shard_dir = out / "predictions" / "shards"
        if shard_dir.is_dir() and not any(shard_dir.iterdir()):
            shard_dir.rmdir()
    return records, counts


def _finish(
    cfg: EvalConfig,
    bench: Benchmark,
    tasks: list[str],
    examples: dict[str, list[dict]],
    sources: dict[str, Any],
    totals: dict[str, int],
    out: Path,
    dist: Dist,
    model_info: dict[str, Any],
) -> dict[str, Any]:
    per_task: dict[str, Any] = {}
    stats: dict[str, Any] = {}
    shards: dict[str, Any] = {}
    prompt_versions: set[str] = set()
    every_example: list[dict[str, Any]] = []
    for task in tasks:
        records, counts = _merge(out, task, [ex["id"] for ex in examples[task]])
        if counts:
            shards[task] = counts
        scores = [
            bench.score(task, r["prediction"], r["ground_truth"], cfg.scorer, cfg.extract)
            for r in records
        ]
        n = len(records)
        per_task[task] = {
            "alias": bench.display.get(task, task),
            "score": round(100.0 * sum(scores) / n, 4),
            "n": n,
            "errors": sum(1 for r in records if r.get("error")),
            "scorer": cfg.scorer,
            "extract": cfg.extract,
        }
        per_example = [r.get("stats") or {} for r in records]
        every_example.extend(per_example)
        stats[task] = _stat_block(_stat_sums(per_example), n)
        for r in records:
            v = r.get("stats", {}).get("prompt_version")
            if v:
                prompt_versions.add(str(v))
    stats["all"] = _stat_block(_stat_sums(every_example), len(every_example))
    return {
        "results": per_task,
        "average": {
            "score": round(sum(per_task[t]["score"] for t in tasks) / len(tasks), 4),
            "tasks": list(tasks),
        },
        "strategy_stats": stats,
        "n-samples": {t: {"original": totals[t], "effective": per_task[t]["n"]} for t in tasks},
        "data": sources,
        "config": config_to_dict(cfg),
        "benchmark": {"name": bench.name, "prompt_version": bench.prompt_version()},
        "strategy": {
            "name": cfg.strategy,
            "args": dict(cfg.strategy_args),
            "prompt_versions": sorted(prompt_versions),
        },
        "model": model_info,
        "distributed": {"world_size": dist.world, "shard_lines": shards},
        "versions": versions(),
        **git_info(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "platform": platform.platform(),
    }


def _stat_sums(per_example: list[dict[str, Any]]) -> dict[str, Any]:
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


def _stat_block(sums: dict[str, Any], n: int) -> dict[str, Any]:
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


def _samples(cfg: EvalConfig, bench: Benchmark, tasks: list[str], out: Path) -> dict[str, list]:
    """Per-sample rows for wandb: id, question, prediction, reference, score, strategy stats."""
    rows: dict[str, list] = {}
    for task in tasks:
        rows[task] = []
        for r in _read_records(_main_file(out, task)):
            st = r.get("stats", {})
            rows[task].append(
                {
                    "id": r["id"],
                    "question": r.get("question", ""),
                    "prediction": r["prediction"],
                    "reference": r["ground_truth"],
                    "score": bench.score(
                        task, r["prediction"], r["ground_truth"], cfg.scorer, cfg.extract
                    ),
                    **{k: st.get(k, 0) for k in STAT_KEYS},
                }
            )
    return rows


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


__all__ = ["RESUME_EXEMPT", "EvalConfig", "make_strategy", "prepare_run_dir", "run_eval"]
