"""The work on one document: its pyramid, questions drawn from the pyramid's nodes, MapReduce
answers to them, and the records (with the stats) that make one ledger entry."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from typing import Any

from chunkwise.embed import Embedder
from chunkwise.llm import LLM
from chunkwise.strategies import Query, get_strategy
from chunkwise.strategies.mapreduce import CollapseError, to_intermediate
from chunkwise.synth.calls import Meter, StageLLM
from chunkwise.synth.config import SynthConfig
from chunkwise.synth.prompting import SynthPrompts, make_request
from chunkwise.synth.pyramid import Pyramid, PyramidError
from chunkwise.synth.pyramid_builder import PyramidBuilder, PyramidConfig
from chunkwise.synth.questions import (
    Candidate,
    answer_problem,
    clean_question,
    question_problem,
    sample_nodes,
)
from chunkwise.synth.records import map_record, validate_record
from chunkwise.synth.sources import SourceDoc
from chunkwise.text import chunk_document

log = logging.getLogger(__name__)


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

    def run(self, doc: SourceDoc, llm: LLM | None = None) -> dict[str, Any]:
        """``doc``'s ledger entry; its calls go to ``llm`` (this worker's model by default:
        the runner passes one that keeps this document's calls)."""
        llm = llm if llm is not None else self.llm
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
                StageLLM(llm, "summary", meter),
                self.prompts,
                self.embedder,
                PyramidConfig(
                    window=self.cfg.window,
                    chunk_tokens=self.cfg.chunk_tokens,
                    fanout=self.cfg.fanout,
                    importance=self.cfg.importance,
                    seed=self.cfg.seed,
                ),
                rate_llm=StageLLM(llm, "importance", meter),
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
            questions = self._questions(pyramid, rng, StageLLM(llm, "question", meter), stats)
            self._check_stop()
            records = self._answer(doc, pyramid, questions, StageLLM(llm, "answer", meter), stats)
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
