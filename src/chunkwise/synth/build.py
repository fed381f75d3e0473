"""Pyramid-Align synthesis: documents → pyramid → questions → MapReduce answers → records.

One document at a time per worker, ``concurrency`` workers sharing one backend through
:class:`~chunkwise.synth.calls.BatchingLLM` (so summary, question and MapReduce calls of
different documents travel in the same batches). Each finished document is one line of a
ledger (``work/docs-I-of-N.jsonl``, a :class:`~chunkwise.io.JsonlAppender` keyed by document
id) holding its records, its pyramid and its stats: a kill loses at most the documents in
flight, and a rerun skips every id already in the ledger. The final files are derived from the
ledger and written atomically at the end of every run::

    OUT/config.json                      settings that shape the content (a rerun must match)
    OUT/data/part-I-of-N.jsonl           the records of shard I (one JSON object a line)
    OUT/pyramids/part-I-of-N.jsonl       every document's pyramid, per-sentence importance kept
    OUT/stats/part-I-of-N.json           the shard's stats
    OUT/stats.json, OUT/dataset/         all shards together (written once every shard is done;
                                         ``datasets.load_from_disk(OUT/dataset)``)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import shutil
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chunkwise.embed import Embedder, get_embedder
from chunkwise.errors import BadInput, ChunkwiseError, LLMRequestError
from chunkwise.io import JsonlAppender, atomic_write_json
from chunkwise.llm import LLM
from chunkwise.run_folders import check_run_folder
from chunkwise.strategies import Query, get_strategy
from chunkwise.strategies.mapreduce import CollapseError, to_intermediate
from chunkwise.synth.calls import BatchingLLM, Meter, StageLLM
from chunkwise.synth.prompting import SynthPrompts, make_request
from chunkwise.synth.pyramid import Pyramid, PyramidError
from chunkwise.synth.pyramid_builder import PyramidBuilder, PyramidConfig
from chunkwise.synth.questions import (
    Candidate,
    answer_problem,
    clean_question,
    parse_mix,
    question_problem,
    sample_nodes,
)
from chunkwise.synth.records import map_record, validate_record
from chunkwise.synth.settings import SETTINGS_FILE, check_settings
from chunkwise.synth.sources import SourceDoc, SourceSkip, iter_source
from chunkwise.text import chunk_document

log = logging.getLogger(__name__)

#: settings recorded in config.json; a rerun into the same folder must give the same values
CONTENT_KEYS = (
    "model",
    "questions_per_doc",
    "window",
    "chunk_tokens",
    "fanout",
    "seed",
    "node_mix",
    "importance",
    "embedder",
    "question_attempts",
    "question_sentences",
    "prompts",
    "mapreduce_args",
    "text_column",
    "split",
    "num_shards",
)


@dataclass
class SynthConfig:
    docs: str
    out: str
    model: str = "hf:default"
    limit: int | None = None
    questions_per_doc: int = 1
    window: int = 4096
    chunk_tokens: int = 0
    fanout: int = 3
    seed: int = 0
    num_shards: int = 1
    shard_index: int = 0
    concurrency: int = 4
    node_mix: dict[str, float] = field(default_factory=lambda: parse_mix(None))
    importance: str = "embedding"
    embedder: str = "minilm"
    question_attempts: int = 3
    question_sentences: int = 5
    prompts: str = "auto"
    mapreduce_args: dict[str, Any] = field(default_factory=dict)
    text_column: str | None = None
    split: str = "train"
    push_to_hub: str | None = None
    progress: bool = True
    #: continue an --out folder started with other settings (config.json is rewritten)
    override_settings: bool = False

    def check(self) -> None:
        if self.num_shards < 1 or not 0 <= self.shard_index < self.num_shards:
            raise BadInput(
                f"--shard-index must be in [0, --num-shards={self.num_shards}), "
                f"got {self.shard_index}"
            )
        for name in ("questions_per_doc", "concurrency", "question_attempts", "question_sentences"):
            if getattr(self, name) < 1:
                raise BadInput(
                    f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}"
                )
        if self.limit is not None and self.limit < 0:
            raise BadInput(f"--limit must be >= 0, got {self.limit}")
        if self.window < 256:
            raise BadInput(f"--window {self.window} is too small (at least 256 tokens)")
        if self.chunk_tokens < 0:
            raise BadInput(f"--chunk-tokens must be >= 0 (0: automatic), got {self.chunk_tokens}")
        if self.prompts not in ("auto", "chat", "base"):
            raise BadInput(f"prompts must be auto, chat or base, got {self.prompts!r}")
        self.node_mix = parse_mix(self.node_mix)

    def content(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: d[k] for k in CONTENT_KEYS}


class Cancelled(Exception):
    """The run is stopping (Ctrl-C): a worker abandons its document at the next stage."""


# -- one document ---------------------------------------------------------------------------


class DocumentSynth:
    """Everything for one document: pyramid, questions, answers, records (a ledger entry)."""

    def __init__(
        self,
        cfg: SynthConfig,
        llm: LLM,
        embedder: Embedder,
        prompts: SynthPrompts,
        stop: threading.Event | None = None,
    ):
        self.cfg = cfg
        self.llm = llm
        self.embedder = embedder
        self.prompts = prompts
        self.stop = stop or threading.Event()
        self.strategy = get_strategy("mapreduce", window=cfg.window, **cfg.mapreduce_args)
        self.model_name = cfg.model

    def _check_stop(self) -> None:
        if self.stop.is_set():
            raise Cancelled

    def run(self, doc: SourceDoc) -> dict[str, Any]:
        t0 = time.perf_counter()
        meter = Meter()
        entry: dict[str, Any] = {
            "source_id": doc.source_id,
            "origin": doc.origin,
            "status": "skipped",
            "reason": None,
            "records": [],
            "document": None,
            "pyramid": None,
        }
        stats: dict[str, Any] = {
            "questions": {"generated": 0, "kept": 0, "dropped": {}},
            "repairs": {},
            "leaves": 0,
            "levels": 0,
            "summary_calls": 0,
        }
        entry["stats"] = stats
        try:
            if not doc.text.strip():
                raise PyramidError("empty_document")
            builder = PyramidBuilder(
                StageLLM(self.llm, "summary", meter),
                self.prompts,
                self.embedder,
                PyramidConfig(
                    window=self.cfg.window,
                    chunk_tokens=self.cfg.chunk_tokens,
                    fanout=self.cfg.fanout,
                    importance=self.cfg.importance,
                    seed=self.cfg.seed,
                ),
                rate_llm=StageLLM(self.llm, "importance", meter),
            )
            self._check_stop()
            pyramid = builder.build(doc.text)
            stats["repairs"] = dict(builder.report.repairs)
            stats.update(
                leaves=len(pyramid.leaves),
                levels=pyramid.levels,
                summary_calls=builder.report.summary_calls,
                summary_nodes=len(pyramid.summary_nodes()),
            )
            entry["pyramid"] = pyramid.to_dict()
            self._check_stop()
            rng = random.Random(f"{self.cfg.seed}:{doc.source_id}")
            questions = self._questions(pyramid, rng, StageLLM(self.llm, "question", meter), stats)
            self._check_stop()
            records = self._answer(
                doc, pyramid, questions, StageLLM(self.llm, "answer", meter), stats
            )
            entry["records"] = records
            if records:
                entry.update(status="done", document=doc.text)
            else:
                entry["reason"] = "no_valid_question"
        except PyramidError as e:
            entry["reason"] = str(e.args[0])
        stats["llm"] = meter.to_dict()
        stats["seconds"] = round(time.perf_counter() - t0, 3)
        return entry

    # -- questions --------------------------------------------------------------------------
    def _questions(
        self, pyramid: Pyramid, rng: random.Random, llm: LLM, stats: dict[str, Any]
    ) -> list[Candidate]:
        k = self.cfg.questions_per_doc
        stems = self.prompts.get("stems", {}) or {}
        base = self.prompts.kind == "base"
        kept: list[Candidate] = []
        dropped: Counter[str] = Counter()
        used: set[str] = set()
        for attempt in range(self.cfg.question_attempts):
            need = k - len(kept)
            if need <= 0:
                break
            draws = sample_nodes(pyramid, need, self.cfg.node_mix, rng, used)
            cands = []
            for node, kind in draws:
                options = stems.get(kind) or ["What"]
                stem = rng.choice(options)
                shown = " ".join(
                    " ".join(s.split()) for s in node.top_sentences(self.cfg.question_sentences)
                )
                prompt = self.prompts.render("question", sentences=shown, stem=stem)
                cands.append(Candidate(node, kind, stem, prompt))
            params = self.prompts.params("question", seed=self.cfg.seed + attempt)
            outs = llm.generate([make_request(llm, c.prompt, params) for c in cands])
            stats["questions"]["generated"] += len(outs)
            for c, o in zip(cands, outs, strict=True):
                c.question = clean_question(o.text, c.stem if base else "")
                c.problem = question_problem(c.question, c.node.text, [x.question for x in kept])
                if c.problem:
                    dropped[c.problem] += 1
                    samples = stats["questions"].setdefault("dropped_samples", [])
                    if len(samples) < 10:  # for reading what the model wrote, and tuning rules
                        samples.append([c.problem, c.question])
                elif len(kept) < k:
                    kept.append(c)
        stats["questions"]["dropped"] = dict(dropped)
        return kept

    # -- answers and records ----------------------------------------------------------------
    def _answer(
        self,
        doc: SourceDoc,
        pyramid: Pyramid,
        cands: list[Candidate],
        llm: LLM,
        stats: dict[str, Any],
    ) -> list[dict[str, Any]]:
        records = []
        dropped = Counter(stats["questions"]["dropped"])
        chunk_cache: dict[int, list[list[int]]] = {}
        for i, c in enumerate(cands):
            self._check_stop()
            try:
                ans = self.strategy.answer(doc.text, Query(c.question, task="qa"), llm)
            except CollapseError:
                dropped["answer_failed"] += 1
                continue
            problem = answer_problem(ans.text)
            reduce_inputs = [e.inputs for e in ans.trace if e.stage == "reduce"]
            if not problem and reduce_inputs and not reduce_inputs[-1]:
                problem = "no_evidence"  # no chunk gave a finding: the answer rests on nothing
            if problem:
                dropped[problem] += 1
                samples = stats["questions"].setdefault("dropped_samples", [])
                if len(samples) < 10:
                    samples.append([problem, c.question, ans.text])
                continue
            extra = ans.stats.extra
            budget = int(extra["chunk_budget"])
            if budget not in chunk_cache:
                chunk_cache[budget] = [
                    [ch.start_char, ch.end_char] for ch in chunk_document(doc.text, llm, budget)
                ]
            m = to_intermediate(ans)
            rec = {
                "id": f"{doc.source_id}#q{i}",
                "source_id": doc.source_id,
                "document": doc.text,
                "question": c.question,
                "intermediate": {
                    "map": [map_record(r) for r in m["map"]],
                    "collapse": [[map_record(r) for r in g] for g in m["collapse"]],
                },
                "answer": ans.text.strip(),
                "meta": {
                    "node_level": c.node.level,
                    "node_ids": [c.node.id],
                    "levels": pyramid.levels,
                    "model": self.model_name,
                    "prompt_version": self.prompts.version,
                    "node_kind": c.kind,
                    "leaves": list(c.node.leaves),
                    "char_span": list(c.node.char_span),
                    "mapreduce": {
                        "prompt_version": str(extra.get("prompt_version", "")),
                        "prompt_kind": str(extra.get("prompt_kind", "")),
                        "chunk_budget": budget,
                        "chunks": chunk_cache[budget],
                    },
                },
            }
            problems = validate_record(rec)
            if problems:  # never write a malformed record
                log.warning(
                    "%s: dropping a malformed record: %s", rec["id"], "; ".join(problems[:3])
                )
                dropped["malformed_record"] += 1
                continue
            rec["document"] = None  # stored once per document in the ledger
            records.append(rec)
        stats["questions"]["dropped"] = dict(dropped)
        stats["questions"]["kept"] = len(records)
        return records


# -- the run --------------------------------------------------------------------------------


def _part(cfg: SynthConfig) -> str:
    return f"part-{cfg.shard_index:05d}-of-{cfg.num_shards:05d}"


def _check_out_dir(cfg: SynthConfig) -> Path:
    out = Path(cfg.out)
    cfg_path = out / SETTINGS_FILE
    # a parallel shard may be writing its temporary config file: not someone else's file
    ignore = (f".{SETTINGS_FILE}.",)
    check_run_folder(
        out, (SETTINGS_FILE,), made_by="chunkwise synth", option="--out", ignore=ignore
    )
    out.mkdir(parents=True, exist_ok=True)
    check_settings(
        cfg_path,
        cfg.content(),
        override=cfg.override_settings,
        override_flag="--override-settings",
    )
    return out


class SynthFailed(ChunkwiseError):
    """Documents failed in this run: no dataset/ or stats.json is written for it."""


def _check_failures(run_info: dict[str, Any], out: Path, cfg: SynthConfig) -> None:
    errors = run_info.get("errors") or {}
    failed = sum(errors.values())
    whole_source = cfg.num_shards == 1 and cfg.limit is None  # a shard or a prefix may be empty
    if not failed and whole_source and not run_info.get("documents_seen"):
        first = run_info.get("first_skip")
        raise SynthFailed(
            f"--docs {cfg.docs}: no usable document"
            + (f" (every item was skipped; first: {first})" if first else " (it is empty)")
        )
    if not failed:
        return
    kinds = ", ".join(f"{k}: {v}" for k, v in sorted(errors.items()))
    first = run_info.get("first_error", "")
    raise SynthFailed(
        f"{failed} of {failed + run_info['processed']} documents failed ({kinds})"
        + (f"; first: {first}" if first else "")
        + f". No dataset/ or stats.json written; finished documents are kept in {out / 'work'} "
        "and a rerun retries only the failed ones"
    )


def _selected(cfg: SynthConfig) -> Iterator[tuple[int, SourceDoc | SourceSkip]]:
    """The source items of this shard: the first ``limit`` of the source, every N-th. The
    source is opened at once (a missing one fails here), then read lazily."""
    source = iter_source(cfg.docs, text_column=cfg.text_column, split=cfg.split)

    def items() -> Iterator[tuple[int, SourceDoc | SourceSkip]]:
        for i, item in enumerate(source):
            if cfg.limit is not None and i >= cfg.limit:
                return
            if i % cfg.num_shards == cfg.shard_index:
                yield i, item

    return items()


def run_synth(
    cfg: SynthConfig, llm: LLM | None = None, embedder: Embedder | None = None
) -> dict[str, Any]:
    """Synthesize (or continue synthesizing) into ``cfg.out``; returns the shard's stats."""
    cfg.check()
    out = _check_out_dir(cfg)
    part = _part(cfg)
    work = out / "work"
    items = _selected(cfg)  # opens the source now: a missing one fails before any model loads
    own_llm = llm is None
    if llm is None:
        from chunkwise.llm import load_llm

        llm = load_llm(cfg.model)
    try:
        embedder = embedder or get_embedder(cfg.embedder)
        prompts = SynthPrompts.for_llm(llm, cfg.prompts)
        # settings errors (window too small, leaves too big) surface here, once, not per document
        PyramidBuilder(
            llm,
            prompts,
            embedder,
            PyramidConfig(
                window=cfg.window,
                chunk_tokens=cfg.chunk_tokens,
                fanout=cfg.fanout,
                importance=cfg.importance,
            ),
        )
        t0 = time.perf_counter()
        run_info = _process(cfg, llm, embedder, prompts, items, work / f"docs-{part}.jsonl")
        run_info["seconds"] = round(time.perf_counter() - t0, 3)
        with JsonlAppender(work / f"runs-{part}.jsonl", key="run") as runs:
            run_info["run"] = len(runs)
            runs.write(run_info)
        _check_failures(run_info, out, cfg)  # a failed document: no complete-looking outputs
        return export(cfg)
    finally:
        if own_llm:
            llm.close()


def _shard_total(cfg: SynthConfig) -> int | None:
    """Documents this shard will see (None when the source cannot be counted cheaply)."""
    from chunkwise.synth.sources import count_source

    n = count_source(cfg.docs)
    if n is None:
        return None
    if cfg.limit is not None:
        n = min(n, cfg.limit)
    return len(range(cfg.shard_index, n, cfg.num_shards))


def _process(
    cfg: SynthConfig,
    llm: LLM,
    embedder: Embedder,
    prompts: SynthPrompts,
    items: Iterable[tuple[int, SourceDoc | SourceSkip]],
    ledger_path: Path,
) -> dict[str, Any]:
    info: dict[str, Any] = {"processed": 0, "errors": {}, "duplicates": 0, "started": time.time()}
    errors: Counter[str] = Counter()
    stop = threading.Event()
    shared: LLM = BatchingLLM(llm) if cfg.concurrency > 1 else llm
    synth = DocumentSynth(cfg, shared, embedder, prompts, stop)
    seen: set[str] = set()
    bar = None
    if cfg.progress:
        from tqdm import tqdm

        bar = tqdm(desc="synth documents", unit="doc", total=_shard_total(cfg))

    def work(doc: SourceDoc) -> dict[str, Any] | None:
        ctx = shared.worker() if isinstance(shared, BatchingLLM) else contextlib.nullcontext()
        with ctx:
            try:
                return synth.run(doc)
            except Cancelled:
                return None
            except (LLMRequestError, ChunkwiseError) as e:
                log.error("%s: %s (will be retried by a rerun)", doc.origin, e)
                errors[type(e).__name__] += 1
                info.setdefault("first_error", f"{doc.origin}: {str(e).splitlines()[0]}")
                return None
            except Exception as e:  # a bug must not end the run; the document is retried later
                log.error(
                    "%s: unexpected %s: %s\n%s",
                    doc.origin,
                    type(e).__name__,
                    e,
                    traceback.format_exc(),
                )
                errors[type(e).__name__] += 1
                info.setdefault("first_error", f"{doc.origin}: {type(e).__name__}: {e}")
                return None

    with JsonlAppender(ledger_path, key="source_id") as ledger:
        pool = ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix="synth")
        inflight: dict[Future, str] = {}

        def drain(block: bool) -> None:
            if not inflight:
                return
            done, _ = wait(
                list(inflight), return_when=FIRST_COMPLETED, timeout=None if block else 0
            )
            for f in done:
                inflight.pop(f)
                entry = f.result()
                if entry is not None:
                    ledger.write(entry)
                    info["processed"] += 1
                if bar is not None:
                    bar.update(1)

        try:
            for _, item in items:
                sid = item.source_id
                if isinstance(item, SourceSkip):
                    info.setdefault("first_skip", f"{item.origin}: {item.reason}")
                else:
                    info["documents_seen"] = info.get("documents_seen", 0) + 1
                if sid in ledger or sid in seen:
                    if sid in seen:
                        info["duplicates"] += 1
                    continue
                seen.add(sid)
                if isinstance(item, SourceSkip):
                    ledger.write(
                        {
                            "source_id": sid,
                            "origin": item.origin,
                            "status": "skipped",
                            "reason": item.reason,
                            "records": [],
                            "document": None,
                            "pyramid": None,
                            "stats": {},
                        }
                    )
                    info["processed"] += 1
                    continue
                while len(inflight) >= 2 * cfg.concurrency:
                    drain(block=True)
                inflight[pool.submit(work, item)] = sid
                drain(block=False)
            while inflight:
                drain(block=True)
        except BaseException:
            stop.set()  # workers give up at their next stage; finished documents are kept
            for f in list(inflight):
                f.cancel()
            pool.shutdown(wait=True, cancel_futures=True)
            for f, _sid in list(inflight.items()):
                if f.done() and not f.cancelled() and f.exception() is None and f.result():
                    ledger.write(f.result())
            raise
        finally:
            pool.shutdown(wait=True)
            if bar is not None:
                bar.close()
    info["errors"] = dict(errors)
    return info


# -- outputs --------------------------------------------------------------------------------


def _ledger_entries(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    from chunkwise.io import read_jsonl

    for _, entry in read_jsonl(path, skip_bad_lines=True):
        yield entry


def _records_of(entry: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for r in entry.get("records") or []:
        yield {**r, "document": entry["document"]}


def _write_jsonl_atomic(path: Path, lines: Iterable[dict[str, Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    n = 0
    with tmp.open("w", encoding="utf-8") as f:
        for rec in lines:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return n


def _add_stage(total: dict[str, dict[str, float]], stages: dict[str, dict[str, float]]) -> None:
    for stage, s in stages.items():
        t = total.setdefault(
            stage, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0}
        )
        for k in t:
            t[k] += s.get(k, 0)


def shard_stats(entries: Iterable[dict[str, Any]], runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Stats over ledger entries (one per document) and the runs that wrote them."""
    docs, skipped = 0, Counter()
    examples = 0
    with_examples = 0
    level_hist: Counter[int] = Counter()
    kind_mix: Counter[str] = Counter()
    levels_hist: Counter[int] = Counter()
    leaves: list[int] = []
    mr_chunks: list[int] = []
    llm_total: dict[str, dict[str, float]] = {}
    q_generated = 0
    q_dropped: Counter[str] = Counter()
    repairs: Counter[str] = Counter()
    summary_calls = 0
    doc_seconds = 0.0
    for e in entries:
        docs += 1
        st = e.get("stats") or {}
        if e.get("status") != "done":
            skipped[e.get("reason") or "unknown"] += 1
        if e.get("pyramid"):
            leaves.append(int(st.get("leaves", 0)))
            levels_hist[int(st.get("levels", 0))] += 1
            summary_calls += int(st.get("summary_calls", 0))
        _add_stage(llm_total, st.get("llm") or {})
        q = st.get("questions") or {}
        q_generated += int(q.get("generated", 0))
        q_dropped.update(q.get("dropped") or {})
        repairs.update(st.get("repairs") or {})
        doc_seconds += float(st.get("seconds", 0.0))
        recs = e.get("records") or []
        if recs:
            with_examples += 1
            mr_chunks.append(len(recs[0]["meta"]["mapreduce"]["chunks"]))
        for r in recs:
            examples += 1
            level_hist[r["meta"]["node_level"]] += 1
            kind_mix[r["meta"]["node_kind"]] += 1
    wall = sum(float(r.get("seconds", 0.0)) for r in runs)
    built = len(leaves)

    def dist(xs: list[int]) -> dict[str, float]:
        if not xs:
            return {"mean": 0.0, "min": 0, "max": 0, "total": 0}
        return {
            "mean": round(sum(xs) / len(xs), 3),
            "min": min(xs),
            "max": max(xs),
            "total": sum(xs),
        }

    for t in llm_total.values():
        t["seconds"] = round(t["seconds"], 3)
    all_calls = sum(int(t["calls"]) for t in llm_total.values())
    return {
        "documents": {
            "total": docs,
            "with_examples": with_examples,
            "pyramids_built": built,
            "skipped": dict(skipped),
            "duplicates_in_source": int(runs[-1].get("duplicates", 0)) if runs else 0,
            "errors_last_run": runs[-1].get("errors", {}) if runs else {},
        },
        "examples": examples,
        "level_histogram": {str(k): v for k, v in sorted(level_hist.items())},
        "question_node_mix": {k: kind_mix.get(k, 0) for k in ("leaf", "mid", "root")},
        "pyramid_levels_histogram": {str(k): v for k, v in sorted(levels_hist.items())},
        "chunks_per_document": {
            "pyramid_leaves": dist(leaves),
            "mapreduce_chunks": dist(mr_chunks),
        },
        "llm": {
            "by_stage": llm_total,
            "calls": all_calls,
            "prompt_tokens": int(sum(t["prompt_tokens"] for t in llm_total.values())),
            "completion_tokens": int(sum(t["completion_tokens"] for t in llm_total.values())),
            "summary_calls_per_leaf": round(summary_calls / sum(leaves), 4) if leaves else 0.0,
        },
        "questions": {"generated": q_generated, "kept": examples, "dropped": dict(q_dropped)},
        "repairs": dict(repairs),
        "seconds": {
            "wall": round(wall, 3),
            "document_sum": round(doc_seconds, 3),
            "documents_per_hour": round(3600 * docs / wall, 2) if wall > 0 else None,
        },
        "runs": len(runs),
    }


def _merge_stats(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Add shard stats together (counters add; means are recomputed from totals)."""
    if len(parts) == 1:
        return parts[0]

    def add(a: Any, b: Any) -> Any:
        if isinstance(a, dict) and isinstance(b, dict):
            return {k: add(a.get(k), b.get(k)) for k in {**a, **b}}
        if a is None:
            return b
        if b is None:
            return a
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
            return a + b
        return a

    merged: Any = parts[0]
    for p in parts[1:]:
        merged = add(merged, p)
    for key in ("pyramid_leaves", "mapreduce_chunks"):
        ds = [p["chunks_per_document"][key] for p in parts]
        n = [
            p["documents"]["pyramids_built" if key == "pyramid_leaves" else "with_examples"]
            for p in parts
        ]
        total = sum(d["total"] for d in ds)
        merged["chunks_per_document"][key] = {
            "mean": round(total / sum(n), 3) if sum(n) else 0.0,
            "min": min((d["min"] for d, k in zip(ds, n, strict=True) if k), default=0),
            "max": max((d["max"] for d in ds), default=0),
            "total": total,
        }
    leaves = merged["chunks_per_document"]["pyramid_leaves"]["total"]
    calls = merged["llm"]["by_stage"].get("summary", {}).get("calls", 0)
    merged["llm"]["summary_calls_per_leaf"] = round(calls / leaves, 4) if leaves else 0.0
    wall = max(p["seconds"]["wall"] for p in parts)  # shards run side by side
    merged["seconds"]["wall"] = wall
    merged["seconds"]["documents_per_hour"] = (
        round(3600 * merged["documents"]["total"] / wall, 2) if wall > 0 else None
    )
    return merged


def export(cfg: SynthConfig) -> dict[str, Any]:
    """Write the shard's final files from its ledger; merge all shards once each has stats."""
    out = Path(cfg.out)
    part = _part(cfg)
    ledger = out / "work" / f"docs-{part}.jsonl"
    runs_path = out / "work" / f"runs-{part}.jsonl"
    runs = [r for _, r in _read(runs_path)]
    _write_jsonl_atomic(
        out / "data" / f"{part}.jsonl", (r for e in _ledger_entries(ledger) for r in _records_of(e))
    )
    _write_jsonl_atomic(
        out / "pyramids" / f"{part}.jsonl",
        (
            {"source_id": e["source_id"], **e["pyramid"]}
            for e in _ledger_entries(ledger)
            if e.get("pyramid")
        ),
    )
    stats = shard_stats(_ledger_entries(ledger), runs)
    stats["config"] = {**cfg.content(), "docs": cfg.docs, "shard_index": cfg.shard_index}
    atomic_write_json(out / "stats" / f"{part}.json", stats)
    _merge_all(cfg, out)
    return stats


def _read(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.exists():
        return iter(())
    from chunkwise.io import read_jsonl

    return read_jsonl(path, skip_bad_lines=True)


def _merge_all(cfg: SynthConfig, out: Path) -> None:
    import fcntl

    names = [f"part-{i:05d}-of-{cfg.num_shards:05d}" for i in range(cfg.num_shards)]
    if not all((out / "stats" / f"{n}.json").exists() for n in names):
        missing = [n for n in names if not (out / "stats" / f"{n}.json").exists()]
        log.info("waiting for shards %s before writing stats.json and dataset/", ", ".join(missing))
        return
    with open(out / "work" / ".merge.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        parts = [json.loads((out / "stats" / f"{n}.json").read_text()) for n in names]
        stats = _merge_stats(parts)
        stats["config"] = {**cfg.content(), "docs": cfg.docs}
        stats["files"] = {
            "data": [f"data/{n}.jsonl" for n in names],
            "dataset": "dataset",
            "pyramids": [f"pyramids/{n}.jsonl" for n in names],
        }
        _save_dataset(out, [out / "data" / f"{n}.jsonl" for n in names])
        atomic_write_json(out / "stats.json", stats)
        if cfg.push_to_hub:
            _push(out, cfg.push_to_hub)


def load_dataset(out: str | Path) -> Any:
    """The records of a finished synthesis folder as a ``datasets.Dataset``."""
    import datasets

    return datasets.load_from_disk(str(Path(out) / "dataset"))


def _save_dataset(out: Path, files: list[Path]) -> None:
    import datasets

    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # our own progress bar and stats say what happened
    try:
        _save_dataset_quietly(out, files)
    finally:
        if bars:
            datasets.enable_progress_bars()


def _save_dataset_quietly(out: Path, files: list[Path]) -> None:
    import datasets

    from chunkwise.synth.records import features

    feats = features()
    nonempty = [str(f) for f in files if f.exists() and f.stat().st_size > 0]
    if nonempty:
        ds = datasets.Dataset.from_json(
            nonempty, features=feats, cache_dir=str(out / "work" / "hf-cache")
        )
    else:
        ds = datasets.Dataset.from_dict({k: [] for k in feats}, features=feats)
    tmp = out / f".dataset.{os.getpid()}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    ds.save_to_disk(str(tmp), num_shards=1 if len(ds) == 0 else None)
    final = out / "dataset"
    old = out / f".dataset.{os.getpid()}.old"
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(out / "work" / "hf-cache", ignore_errors=True)


def _push(out: Path, name: str) -> None:
    try:
        load_dataset(out).push_to_hub(name)
    except Exception as e:
        raise BadInput(
            f"--push-to-hub {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
            f"(the local files in {out} are complete)"
        ) from None
