"""The evaluation runner: one model, one strategy (decoding mode), a benchmark's tasks.

``run_eval(config)`` writes a run folder::

    runs/NAME/config.yaml                  the resolved EvalConfig (a valid recipe)
    runs/NAME/predictions/<task>.jsonl     {id, prediction, raw_output, ground_truth, strategy,
                                            model, question, stats, trace?, prompt?, audit?
                                            [, error]}
    runs/NAME/results.json                 scores with stderr and 95% intervals, provenance,
                                            versions, git sha, timings (:mod:`.results`)
    runs/NAME/samples/<task>.jsonl         with --log-samples: prompt, raw output, extracted
                                            answer and score of every example
    runs/NAME/calls/rank<r>.jsonl          while the run is unfinished: every model call done
                                            (:mod:`chunkwise.llm.call_cache`)

Any registered strategy is a decoding mode: the runner builds it from its name and options and
calls ``answer(document, query, llm)``; nothing here knows one strategy from another. The model
it hands over records every call (:mod:`.recording`), which gives each prediction its exact
prompt(s) and the raw text of the last call. Scoring reads that raw text when the benchmark
says the extractor does (:attr:`~chunkwise.benchmarks.Benchmark.reads_raw`), and the benchmark
says what ``extract: auto`` means under the run's strategy
(:attr:`~chunkwise.benchmarks.Benchmark.resolve_extract`; InfiniteBench's: the strategy's parsed
answer under mapreduce). What the report reads of the run is a
:class:`~chunkwise.eval.report.RunContext`. With ``audit`` each prediction is audited from the
trace and prompts in memory (:mod:`chunkwise.eval.audit`: where its gold evidence went, no model
call), and the report adds the funnels.

Order of work: config, benchmark, tasks, scoring, templates and strategy are checked; then the
data is loaded and checked (sources that need no tokenizer) before the model is; config.yaml
is written only when the first prediction exists (:mod:`.run_dir`).

Resuming: every prediction is appended and fsynced as soon as it exists, so rerunning the same
command skips the ids already written; examples that failed are tried again. Inside an
example nothing finished is lost either: each model call is kept in ``calls/`` as it returns
(greedy or seeded ones, in pieces of at most 512 calls), the rerun replays them, and the folder
is removed once every example has its line. A rerun with
nothing left to answer (e.g. rescoring with another ``--extract``) does not load the model
when an earlier results file recorded it (:mod:`.rescore`). A run folder whose
config.yaml differs from the new config (in anything but where it is written, how it is scored,
or wandb) is refused.

Data parallel: with ``Dist(rank, world)`` each rank answers examples ``rank::world`` into its own
``predictions/shards/<task>.rank<r>.jsonl``; after a barrier rank 0 merges the shards into
``predictions/<task>.jsonl`` (in data order, each id once) and scores.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chunkwise.benchmarks import Benchmark, Templates, get_benchmark
from chunkwise.errors import BadInput, ChunkwiseError, LLMRequestError, MissingDependency
from chunkwise.eval.config import RESUME_EXEMPT, EvalConfig, take
from chunkwise.eval.distributed import Dist
from chunkwise.eval.recording import RecordingLLM
from chunkwise.eval.report import RunContext, finish, score_record, wandb_samples
from chunkwise.eval.rescore import rescore_model_info
from chunkwise.eval.results import stat_block, stat_sums
from chunkwise.eval.run_dir import (
    answered,
    drop_errored,
    lock_run_dir,
    main_file,
    prepare_run_dir,
    shard_file,
    show_ids,
    write_config,
)
from chunkwise.io import JsonlAppender, atomic_write_json
from chunkwise.redact import redact

log = logging.getLogger(__name__)

# kept importable from here (older callers and tests)
_stat_sums, _stat_block = stat_sums, stat_block


def strategy_options(cfg: EvalConfig) -> Any:
    """The strategy's options for this run: the user's (``strategy_args``, and
    ``context_window`` as ``window``) over those the model carries in its strategy.json."""
    from chunkwise.strategies import resolve_options

    kwargs: dict[str, Any] = dict(cfg.strategy_args)
    if cfg.context_window is not None:
        kwargs["window"] = cfg.context_window
    return resolve_options(cfg.strategy, cfg.model, kwargs)


def make_strategy(cfg: EvalConfig):
    return strategy_options(cfg).build()


@dataclass
class _Session:
    #: what the report reads too
    run: RunContext
    strategy: Any
    llm: RecordingLLM
    window: int
    dist: Dist
    progress: bool
    config_written: bool = False
    #: the kept calls (:class:`~chunkwise.llm.call_cache.CachedLLM`), whose counts the bar shows
    cached: Any = None


@dataclass
class _Plan:
    """Everything checked before anything is loaded or written."""

    cfg: EvalConfig
    bench: Benchmark
    tasks: list[str]
    data_spec: Any
    extract: str
    templates: Templates | None
    strategy: Any
    #: the strategy's resolved options and where each came from (recorded in results.json)
    options: Any = None


def _plan(cfg: EvalConfig) -> _Plan:
    bench = get_benchmark(cfg.benchmark)
    data_spec = bench.parse_data(cfg.data)
    if [t.lower() for t in cfg.tasks] == ["all"]:
        tasks = bench.check_tasks(bench.all_tasks(data_spec))
    else:
        tasks = bench.check_tasks(cfg.tasks)
    extract = bench.resolve_extract(cfg.extract, cfg.strategy)
    if cfg.extract == "auto" and extract not in bench.extractors:
        extract = "none"
    bench.check_scoring(cfg.scorer, extract)
    templates = None
    if cfg.prompt_source is not None:
        if bench.load_templates is None:
            raise BadInput(f"--prompt-source: the {bench.name} benchmark has no official templates")
        templates = bench.load_templates(cfg.prompt_source, str(cfg.prompt_family))
    options = strategy_options(cfg)
    return _Plan(cfg, bench, tasks, data_spec, extract, templates, options.build(), options)


def _load(p: _Plan, task: str, count_tokens: Any) -> Any:
    cfg = p.cfg
    td = p.bench.load(
        task,
        p.data_spec,
        limit=cfg.limit if isinstance(cfg.limit, int) else None,
        revision=cfg.revision,
        seed=cfg.seed,
        count_tokens=count_tokens,
    )
    td.examples = take(td.examples, cfg.limit)
    if not td.examples:
        raise BadInput(f"{task}: the data has no examples")
    return td


def run_eval(
    cfg: EvalConfig, *, dist: Dist | None = None, llm: Any = None, progress: bool = True
) -> dict[str, Any] | None:
    """Evaluate; returns results.json's content on rank 0 (None on other ranks).

    ``llm``: an already loaded model (it is then neither loaded nor closed here). The run
    folder is locked from before it is read until results.json is written
    (:func:`~.run_dir.lock_run_dir`): another run on it is refused.
    """
    with contextlib.ExitStack() as held:
        return _run_eval(cfg, dist or Dist(), llm, progress, held)


def _run_eval(
    cfg: EvalConfig, dist: Dist, llm: Any, progress: bool, held: contextlib.ExitStack
) -> dict[str, Any] | None:
    t_start = time.perf_counter()
    cfg = cfg.resolved()
    plan = _plan(cfg)
    if llm is None:
        from chunkwise.llm import parse_spec

        parse_spec(cfg.model)  # a malformed spec fails before anything is read or written
    out = Path(cfg.output)
    held.enter_context(lock_run_dir(out, dist))
    resumed = prepare_run_dir(out, cfg, dist)

    # the data first: a missing file or an unreachable hub fails before the model loads
    loaded: dict[str, Any] = {}
    ids: dict[str, list[Any]] = {}  # every task's ids: is anything left to answer?
    if not getattr(plan.data_spec, "needs_tokenizer", False):
        for k, task in enumerate(plan.tasks):
            td = _load(plan, task, None)
            ids[task] = [ex["id"] for ex in td.examples]
            if k == 0:  # kept; the others are read again in their turn (contexts are large)
                loaded[task] = td
            del td

    own_llm = llm is None
    # a rescore (every example answered) calls no model: an earlier scoring's model block stands in
    stored = rescore_model_info(out, redact(cfg.model), ids) if own_llm else None
    t0 = time.perf_counter()
    if own_llm and stored is None:
        from chunkwise.llm import load_llm

        llm = load_llm(cfg.model)
    load_s = time.perf_counter() - t0
    model, cached = llm, None
    if llm is not None:  # every finished call is kept: a killed run resumes mid-example
        from chunkwise.llm.call_cache import CachedLLM, CallCache
        from chunkwise.llm.loading import model_identity

        cached = CachedLLM(llm, CallCache(out / "calls", model_identity(cfg.model), dist.rank))
        llm = cached
    sources: dict[str, Any] = {}
    totals: dict[str, int] = {}
    examples: dict[str, list[dict[str, Any]]] = {}
    try:
        if stored is not None:
            kind, window = stored["prompt_kind"], stored["strategy_window"]
        else:
            kind = cfg.prompts if cfg.prompts != "auto" else ("chat" if llm.chat else "base")
            window = plan.strategy.effective_window(llm)
        run = RunContext(
            cfg=cfg,
            bench=plan.bench,
            extract=plan.extract,
            kind=kind,
            out=out,
            world_size=dist.world,
            templates=plan.templates,
        )
        s = _Session(run, plan.strategy, RecordingLLM(llm), window, dist, progress, cached=cached)
        for task in plan.tasks:
            count = llm.count_tokens if llm is not None else None  # None: rescoring
            td = loaded.pop(task, None) or _load(plan, task, count)
            sources[task], totals[task] = td.source, td.total
            # keep only what scoring needs: contexts can be hundreds of MB per task (the
            # audit keeps each example's evidence: spans, their text, the gold values)
            examples[task] = [_kept(plan, task, ex) for ex in td.examples]
            _generate(s, task, td.examples)
            del td
        model_info = stored if stored is not None else _model_info(cfg, llm, kind, window)
        if cached is not None:  # this rank's examples all have their lines: nothing to resume
            if cached.replayed:
                log.info("%d model calls replayed from %s", cached.replayed, cached.cache.folder)
            cached.cache.remove()
    finally:
        if cached is not None:
            cached.cache.close()
        if own_llm and model is not None:
            model.close()
    dist.barrier()  # every rank's shard is complete
    if not dist.is_main:
        return None
    results = finish(s.run, plan.tasks, examples, sources, totals, model_info, resumed)
    results["strategy"].update(plan.options.record())
    results["timing"] = {
        "model_load_seconds": round(load_s, 3),
        "model_loaded": llm is not None,
        "session_seconds": round(time.perf_counter() - t_start, 3),
        "generation_seconds_all_sessions": round(
            sum(results["strategy_stats"][t]["seconds"] for t in plan.tasks), 3
        ),
        "resumed": resumed,
    }
    if cached is not None and dist.world == 1:
        results["timing"]["calls"] = {"computed": cached.computed, "replayed": cached.replayed}
    path = out / results["files"]["results"]
    atomic_write_json(path, results)
    if cfg.wandb:
        from chunkwise.eval.wandb_log import log_eval

        log_eval(out, results, wandb_samples(s.run, plan.tasks), results_file=path)
    return results


def _kept(plan: _Plan, task: str, ex: dict[str, Any]) -> dict[str, Any]:
    """What the report needs of an example once it is answered."""
    if not plan.cfg.audit:
        return {"id": ex["id"]}
    from chunkwise.eval.audit import evidence_of

    return {"id": ex["id"], "evidence": evidence_of(plan.bench, task, ex)}


def _model_info(cfg: EvalConfig, llm: Any, kind: str, window: int) -> dict[str, Any]:
    from chunkwise.eval.provenance import model_provenance

    return {
        "spec": redact(cfg.model),
        "context_window": llm.context_window,
        "chat": bool(llm.chat),
        "prompt_kind": kind,
        "strategy_window": window,
        # hf: the torch dtype the weights run in (on CPU chosen per CPU kind: chunkwise.llm.cpu)
        "dtype": str(getattr(getattr(llm, "model", None), "dtype", "")).removeprefix("torch.")
        or None,
        "provenance": model_provenance(cfg.model),
    }


# --------------------------------------------------------------------------------------------
# generation


def _generate(s: _Session, task: str, examples: list[dict[str, Any]]) -> None:
    from tqdm import tqdm

    out, dist = s.run.out, s.dist
    valid = {ex["id"] for ex in examples}
    mine = main_file(out, task) if dist.world == 1 else shard_file(out, task, dist.rank)
    retried = drop_errored(mine)
    if retried:
        log.info("%s: trying %d failed examples again: %s", task, len(retried), show_ids(retried))
    done = answered(out, task)
    unknown = [i for i in done if i not in valid]
    if unknown:
        raise BadInput(
            f"{out}/predictions holds {task} predictions for ids that are not in the data: "
            f"{show_ids(unknown)}. The data changed since this run began; pass a new "
            "--output (or delete those lines)"
        )
    my = examples[dist.rank :: dist.world]
    todo = [ex for ex in my if ex["id"] not in done]
    if not todo:
        return
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
    app: JsonlAppender | None = None
    # the model calls so far beside the score: at 128K the examples in flight take hours to
    # finish, and the calls say the run is alive
    postfix: dict[str, str] = {}
    shown = threading.Lock()  # the calls are counted in the thread that sends them

    def show(refresh: bool = True, **fields: str) -> None:
        with shown:
            postfix.update(fields)
            bar.set_postfix(postfix, refresh=refresh)

    if s.cached is not None and s.progress:
        s.cached.on_progress = lambda: show(calls=s.cached.describe())
    try:
        with bar:
            for rec in _answers(s, task, todo):
                if not s.config_written:  # the first prediction exists: now the run does too
                    write_config(out, s.run.cfg)
                    s.config_written = True
                if app is None:
                    app = JsonlAppender(mine)
                app.write(rec)
                got += score_record(s.run, task, rec)[1]
                n += 1
                show(refresh=False, score=f"{100 * got / n:.1f}")
                bar.update(1)
    finally:
        if s.cached is not None:
            s.cached.on_progress = None
        if app is not None:
            app.close()
    log.info("%s%s: %d new predictions (%d were done)", task, where, n, len(my) - len(todo))


def _answers(s: _Session, task: str, todo: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Prediction records of ``todo``: one at a time, in data order, or with ``parallel`` > 1
    that many at once (each in its own thread, their model calls merged into one batch by
    :class:`~chunkwise.llm.coalescing.CoalescingLLM`), in the order they finish."""
    if s.run.cfg.parallel <= 1 or len(todo) < 2:
        for ex in todo:
            yield _predict(s, task, ex, s.llm)
        return
    from chunkwise.llm.coalescing import CoalescingLLM, run_each

    shared = CoalescingLLM(s.llm.wrapped())
    work = lambda ex: _predict(s, task, ex, RecordingLLM(shared))  # noqa: E731
    for _ex, rec in run_each(todo, work, shared, s.run.cfg.parallel):
        if isinstance(rec, BaseException):
            raise rec  # the model is unreachable or broken: stop; a rerun resumes
        yield rec


def _predict(s: _Session, task: str, ex: dict[str, Any], llm: RecordingLLM) -> dict[str, Any]:
    cfg, bench, templates = s.run.cfg, s.run.bench, s.run.templates
    question, error, text, stats, trace = "", None, "", {}, []
    llm.reset()
    try:
        extra = {"templates": templates} if templates is not None else {}
        query = bench.build_query(task, ex, s.run.kind, s.window, **extra)
        if cfg.truncation != query.truncation:
            query = dataclasses.replace(query, truncation=cfg.truncation)
        question = query.render()
        ans = s.strategy.answer(ex["context"], query, llm)
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
        "raw_output": llm.raw_output(bench.answer_markers),
        "ground_truth": ex["answer"],
        "strategy": cfg.strategy,
        "model": redact(cfg.model),
        "question": question,
        "stats": stats,
    }
    if error is not None:
        rec["error"] = error
    if cfg.log_samples:
        prompts = list(llm.prompts)
        rec["prompt"] = prompts[0] if len(prompts) == 1 else prompts
    if cfg.save_trace:
        rec["trace"] = trace
    if cfg.audit and error is None:  # from the trace and prompts in memory: no model call
        from chunkwise.eval.audit import audit_prediction, evidence_of

        rec["audit"] = audit_prediction(
            cfg.strategy,
            evidence_of(bench, task, ex),
            trace,
            list(llm.prompts),
            text,
            score_record(s.run, task, rec)[1],
        )
    return rec


__all__ = [
    "RESUME_EXEMPT",
    "EvalConfig",
    "make_strategy",
    "prepare_run_dir",
    "run_eval",
    "strategy_options",
]
