"""Pyramid-Align synthesis: documents → pyramid → questions → MapReduce answers → records.

One document at a time per worker, ``concurrency`` workers sharing one backend through
:class:`~chunkwise.synth.calls.BatchingLLM` (so summary, question and MapReduce calls of
different documents travel in the same batches). Each finished document is one line of a
ledger (``work/docs-I-of-N.jsonl``, a :class:`~chunkwise.io.JsonlAppender` keyed by document
id) holding its records, its pyramid and its stats, and a rerun skips every id already in
the ledger. A kill loses none of the model calls the documents in flight had finished either:
they are kept in ``work/calls/doc-<hash>.jsonl`` (one file a document, written as the calls
return: :class:`~chunkwise.llm.call_cache.CachedLLM`) and replayed by the rerun, and a
document's file is deleted once its ledger line is written. The final files are derived from
the ledger and written atomically at the end of every run::

    OUT/config.json                      settings that shape the content (a rerun must match)
    OUT/data/part-I-of-N.jsonl           the records of shard I (one JSON object a line)
    OUT/pyramids/part-I-of-N.jsonl       every document's pyramid, per-sentence importance kept
    OUT/stats/part-I-of-N.json           the shard's stats
    OUT/stats.json, OUT/dataset/         all shards together (written once every shard is done;
                                         ``datasets.load_from_disk(OUT/dataset)``)
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
import time
import traceback
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from chunkwise.embed import Embedder, get_embedder
from chunkwise.errors import ChunkwiseError, LLMRequestError
from chunkwise.io import JsonlAppender
from chunkwise.llm import LLM
from chunkwise.llm.call_cache import CachedLLM, CallCache
from chunkwise.llm.loading import model_identity
from chunkwise.run_folders import check_run_folder
from chunkwise.synth.calls import BatchingLLM
from chunkwise.synth.config import SynthConfig
from chunkwise.synth.document_worker import Cancelled, DocumentSynth
from chunkwise.synth.outputs import export, part_name
from chunkwise.synth.prompting import SynthPrompts
from chunkwise.synth.pyramid_builder import PyramidBuilder, PyramidConfig
from chunkwise.synth.settings import SETTINGS_FILE, check_settings
from chunkwise.synth.sources import SourceDoc, SourceSkip, iter_source

log = logging.getLogger(__name__)


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
    """Failed documents are skipped (recorded in the run and in stats.json); only a run in
    which every document failed, or a whole source with nothing usable, is an error."""
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
    summary = f"{failed} of {failed + run_info['processed']} documents failed ({kinds})" + (
        f"; first: {first}" if first else ""
    )
    if run_info["processed"] == 0 and not run_info.get("done_before"):
        raise SynthFailed(
            f"{summary}. No dataset/ or stats.json written; a rerun retries the failed documents"
        )
    log.warning(
        "%s. They are skipped: stats.json lists them under failed_documents; a rerun into %s "
        "retries only them",
        summary,
        out,
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
    part = part_name(cfg)
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


def calls_name(source_id: str) -> str:
    """The name of document ``source_id``'s file of kept calls (any id makes a safe name)."""
    return "doc-" + hashlib.sha256(source_id.encode("utf-8")).hexdigest()[:24]


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
    failures: list[dict[str, str]] = []
    lock = threading.Lock()  # workers record failures from their threads
    stop = threading.Event()
    shared: LLM = BatchingLLM(llm) if cfg.concurrency > 1 else llm
    synth = DocumentSynth(cfg, shared, embedder, prompts, stop)
    calls_dir, identity = ledger_path.parent / "calls", model_identity(cfg.model)
    calls: Counter[str] = Counter()  # computed by the model / replayed from kept calls
    seen: set[str] = set()
    bar = None
    if cfg.progress:
        from tqdm import tqdm

        bar = tqdm(desc="synth documents", unit="doc", total=_shard_total(cfg))

    def forget(sid: str) -> None:
        """The document has its ledger line: its kept calls are no longer needed."""
        (calls_dir / f"{calls_name(sid)}.jsonl").unlink(missing_ok=True)

    def work(doc: SourceDoc) -> dict[str, Any] | None:
        ctx = shared.worker() if isinstance(shared, BatchingLLM) else contextlib.nullcontext()
        cache: CallCache | None = None
        kept: CachedLLM | None = None
        with ctx:
            try:
                # a kept-calls file this document cannot resume (a malformed line) fails this
                # document alone, with the error naming file:line; the others go on
                cache = CallCache(calls_dir, identity, name=calls_name(doc.source_id))
                kept = CachedLLM(shared, cache)
                return synth.run(doc, kept)
            except Cancelled:
                return None
            except (LLMRequestError, ChunkwiseError) as e:
                log.error("%s: %s (skipped; a rerun retries it)", doc.origin, e)
                fail(doc, e, f"{doc.origin}: {_first_line(e)}")
                return None
            except Exception as e:  # a bug must not end the run; the document is retried later
                log.error(
                    "%s: unexpected %s: %s\n%s",
                    doc.origin,
                    type(e).__name__,
                    e,
                    traceback.format_exc(),
                )
                fail(doc, e, f"{doc.origin}: {type(e).__name__}: {_first_line(e)}")
                return None
            finally:
                if cache is not None:
                    cache.close()  # kept for a rerun until the ledger has the document
                if kept is not None:
                    with lock:
                        calls.update(computed=kept.computed, replayed=kept.replayed)

    def fail(doc: SourceDoc, e: BaseException, first: str) -> None:
        """Record a document that failed after the backend's retries; the run goes on."""
        with lock:
            errors[type(e).__name__] += 1
            info.setdefault("first_error", first)
            failures.append(
                {
                    "source_id": doc.source_id,
                    "origin": str(doc.origin),
                    "error": f"{type(e).__name__}: {_first_line(e)}",
                }
            )

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
                sid = inflight.pop(f)
                entry = f.result()
                if entry is not None:
                    ledger.write(entry)
                    forget(sid)
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
                    else:
                        info["done_before"] = info.get("done_before", 0) + 1
                        forget(sid)  # a kill between its ledger line and this deletion
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
            for f, sid in list(inflight.items()):
                if f.done() and not f.cancelled() and f.exception() is None and f.result():
                    ledger.write(f.result())
                    forget(sid)
            raise
        finally:
            pool.shutdown(wait=True)
            if bar is not None:
                bar.close()
            with contextlib.suppress(OSError):  # gone once no document's calls are left
                calls_dir.rmdir()
    if calls["replayed"]:
        log.info("%d model calls replayed from %s", calls["replayed"], calls_dir)
    info["calls"] = {"computed": calls["computed"], "replayed": calls["replayed"]}
    info["errors"] = dict(errors)
    info["failed"] = sorted(failures, key=lambda f: f["source_id"])
    return info


def _first_line(e: BaseException) -> str:
    text = str(e)
    return text.splitlines()[0] if text else ""
