"""The MapReduce strategy: its options, and a run's plan and stages in order (map every chunk,
collapse while the results do not fit, reduce once); each stage lives in its own module beside
this one.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.llm import LLM, GenerationParams
from chunkwise.strategies.base import (
    Answer,
    Query,
    Stats,
    Strategy,
    TraceEvent,
    check_option,
    register,
)
from chunkwise.strategies.mapreduce import confidence, prompts
from chunkwise.strategies.mapreduce.collapse import collapse
from chunkwise.strategies.mapreduce.map_stage import run_map
from chunkwise.strategies.mapreduce.prompts import Prompts
from chunkwise.strategies.mapreduce.reduce import run_reduce
from chunkwise.strategies.mapreduce.replies import no_info_stop
from chunkwise.strategies.protocol import Record
from chunkwise.text import chunk_budget, chunk_document


@dataclass
class MapPlan:
    """What a run decides before the first call: prompts, confidence source, chunks."""

    prompts: Prompts
    source: str
    window: int
    budget: int
    chunks: list[Any]
    map_params: GenerationParams


@register
class MapReduce(Strategy):
    """Options (all settable with ``--strategy-args k=v``):

    chunk_tokens        cap on chunk size (default: the prompt set's ``chunk_tokens`` if it has
                        one, else whatever fits the window)
    protocol            structured | plain (free-text notes: the paper's ablation)
    calibration         in-context confidence calibration on/off: only the calibration block
                        (principles + worked example) is removed; scores are still asked for
                        and used
    confidence          auto | self | logprob | both | off (off: no score is asked for, shown
                        to collapse/reduce, or used by the floor or the reduce order)
    prompts             auto | chat | base  (auto: chat when the model has a chat template)
    max_collapse_rounds  bound on collapse rounds, then an error
    early_stop          stop a map call as soon as it says NO INFORMATION
    reduce_order        auto | document | confidence (order of records shown to reduce)
    temperature         decoding temperature for every stage (0 = greedy)
    min_confidence      drop map records below this confidence (auto: the prompt set's
                        ``min_confidence``: 3.5 for base models, whose answer-token probability
                        is the only "no information" signal they give; for chat models 2.5 on
                        retrieval questions (weaker than an inference: a hedged, unreliable
                        or retracted source), else 0)
    keep_when_all_low   when no scored record reaches min_confidence, keep this many of the
                        most confident instead of none
    unscored            keep | drop: what the floor does with records that got no confidence
                        (no score in the text, no log-probabilities from the backend); counted
                        in stats as ``unscored_kept`` / ``unscored_dropped``
    ask_confidence      when a map or collapse reply gives a finding but no confidence line,
                        continue that reply with "Confidence Score:" and take the model's next
                        tokens as its score (``self``/``both`` confidence; backends that can
                        continue a reply); counted as ``confidence_asked`` / ``_filled``.
                        Off by default: hf:default-mr wrote 5 in all 15 follow-ups measured
    grounding           drop map findings whose answer or extracted information is not taken
                        from their chunk, for question families whose findings are quotes
                        (``grounding: quote`` in the prompt set: retrieval); counted as
                        ``map_ungrounded`` (chunk indices in ``ungrounded_parts``). Off by default
                        (a paraphrasing model would lose true findings); hf:default-mr, taught
                        to quote, decodes with it on
    snap_quotes         with grounding on: a map answer that nearly copies one value of its
                        chunk takes that value before the check, instead of being dropped as
                        made up: a long one with one slip at its edge (a stuttered first
                        character), or one with a run of a repeated character miscounted
                        (002555574 for 0025555574); counted as ``map_snapped``
                        (``snapped_parts``). The reduce answer likewise takes the value of the
                        finding it nearly copies (``reduce_snapped``). Short answers and
                        changed characters never snap
    anchor_quotes       drop map findings that reproduce a phrase of five or more words that
                        the question quotes although their chunk does not hold it: the model
                        echoed the question and made up what follows (any question family:
                        :func:`.grounding.misquotes`); counted as ``map_misquoted`` (chunk
                        indices in ``misquoted_parts``). Off by default; hf:default-mr decodes
                        with it on
    echo_check          drop map findings whose answer is (nearly), lies inside, or is mostly
                        a span of ten or more characters that the question quotes (a kv
                        question's key) when their chunk holds neither that span nor the
                        answer: the model copied the question instead of reading the chunk
                        (:mod:`.echo`); counted as ``map_question_echo`` (chunk indices in
                        ``question_echo_parts``), named ``question_echo`` on the map event.
                        A reduce answer that echoes such a span while no finding it was sent
                        holds the span or the answer becomes ``[NO INFORMATION]``
                        (``reduce_question_echo``; the reduce event keeps the raw reply).
                        On by default (it costs no call); ``echo_check=false`` turns it off
    max_new_tokens      cap on every stage's new tokens (0: the prompt set's own
                        ``map/collapse/reduce_max_new_tokens``); a cap also frees window room
                        for chunks and groups
    """

    name = "mapreduce"

    def __init__(
        self,
        window: int | None = None,
        chunk_tokens: int = 0,
        protocol: str = "structured",
        calibration: bool = True,
        confidence: str = "auto",
        prompts: str = "auto",
        max_collapse_rounds: int = 4,
        early_stop: bool = True,
        reduce_order: str = "auto",
        temperature: float = 0.0,
        min_confidence: str = "auto",
        keep_when_all_low: int = 3,
        unscored: str = "keep",
        ask_confidence: bool = False,
        grounding: bool = False,
        snap_quotes: bool = False,
        anchor_quotes: bool = False,
        echo_check: bool = True,
        max_new_tokens: int = 0,
    ):
        super().__init__(window)
        check_option("mapreduce", "max_new_tokens", max_new_tokens, minimum=0)
        self.max_new_tokens = max_new_tokens
        for opt, value, allowed in (
            ("protocol", protocol, ("structured", "plain")),
            ("confidence", confidence, ("auto", "self", "logprob", "both", "off")),
            ("unscored", unscored, ("keep", "drop")),
            ("prompts", prompts, ("auto", "chat", "base")),
            ("reduce_order", reduce_order, ("auto", "document", "confidence")),
        ):
            check_option("mapreduce", opt, value, choices=allowed)
        self.chunk_tokens = chunk_tokens
        self.protocol = protocol
        self.calibration = calibration
        self.confidence = confidence
        self.prompts = prompts
        self.max_collapse_rounds = max_collapse_rounds
        self.early_stop = early_stop
        self.reduce_order = reduce_order
        self.temperature = temperature
        if min_confidence != "auto":
            try:
                float(min_confidence)
            except ValueError:
                raise BadInput(
                    f"mapreduce option min_confidence={min_confidence!r}: "
                    "expected a number from 0 to 5 or 'auto'"
                ) from None
        self.min_confidence = min_confidence
        self.keep_when_all_low = keep_when_all_low
        self.unscored = unscored
        self.ask_confidence = ask_confidence
        self.grounding = grounding
        self.snap_quotes = snap_quotes
        self.anchor_quotes = anchor_quotes
        self.echo_check = echo_check

    def for_planning(self) -> MapReduce:
        """A copy whose map findings all reach collapse and reduce: no decode-time check
        (``grounding``, ``anchor_quotes``, ``echo_check``) and no confidence floor drops one.
        The plan's stand-in replies are filler, not quotes with a score, so those checks would
        drop every one and plan each reduce as if the map had found nothing (and every
        document's reduce as the same call); which real findings they drop is not known
        before the run, so the plan keeps them all: an upper bound for what follows the map."""
        twin = copy.copy(self)
        twin.grounding = twin.snap_quotes = twin.anchor_quotes = twin.echo_check = False
        twin.min_confidence, twin.unscored = "0", "keep"
        return twin

    # -- prompts, public so that training renders exactly what decoding sends --------------
    def _prompts(self, llm: LLM, family: str) -> Prompts:
        kind = self.prompts if self.prompts != "auto" else ("chat" if llm.chat else "base")
        return self.prompt_set(kind, family)

    def prompt_set(self, kind: str, family: str) -> Prompts:
        """The prompt set for a model kind (``chat`` | ``base``) and task family."""
        return prompts.load_prompts(
            kind,
            family,
            protocol=self.protocol,
            confidence=self.confidence,
            calibration=self.calibration,
        )

    def map_prompt(self, p: Prompts, chunk: str, query: Query) -> str:
        return prompts.map_prompt(p, chunk, query)

    def collapse_prompt(self, p: Prompts, records: list[Record], query: Query) -> str:
        return prompts.collapse_prompt(p, records, query)

    def reduce_prompt(self, p: Prompts, records: list[Record], query: Query) -> str:
        return prompts.reduce_prompt(p, records, query, self.reduce_order)

    def record_target(self, p: Prompts, record: Record) -> str:
        """What a map or collapse call should output for ``record`` (a training target)."""
        return prompts.record_target(p, record)

    def min_confidence_for(self, p: Prompts) -> float:
        """The confidence floor in force (0: none; always 0 under confidence=off)."""
        return confidence.min_confidence_for(self, p)

    def confident_records(self, records: list[Record], p: Prompts, stats: Stats) -> list[Record]:
        """The records the confidence floor keeps (:func:`.confidence.confident_records`)."""
        return confidence.confident_records(self, records, p, stats)

    # -- generation settings of the stages -------------------------------------------------
    def stage_params(self, p: Prompts, stage: str, want_logprobs: bool) -> GenerationParams:
        """How stage ``stage`` (map, collapse, reduce) decodes: its prompt set's budget and
        stops, this strategy's temperature, cap and early stop."""
        stop = list(p.templates.get(f"{stage}_stop", []))
        if stage == "map" and self.early_stop and self.protocol == "structured":
            stop.append(no_info_stop(p))
        return GenerationParams(
            max_new_tokens=self.cap(int(p.templates[f"{stage}_max_new_tokens"])),
            temperature=self.temperature,
            stop=tuple(stop),
            logprobs=want_logprobs,
        )

    def cap(self, n: int) -> int:
        """A stage's new-token budget under ``max_new_tokens``."""
        return min(n, self.max_new_tokens) if self.max_new_tokens else n

    # -- the pipeline ---------------------------------------------------------------------
    def plan(self, document: str, query: Query, llm: LLM) -> MapPlan:
        """The prompt set, chunk budget and chunks a run on ``llm`` uses (public so that a
        teacher renders exactly the chunks and prompts decoding sends)."""
        p = replace(self._prompts(llm, query.task), answer_prefix=query.answer_prefix)
        source = confidence.confidence_source(self.confidence, p)
        window = self.effective_window(llm)
        map_params = self.stage_params(p, "map", source in ("logprob", "both"))
        template_tokens = llm.prompt_tokens(llm.as_prompt(self.map_prompt(p, "", query)))
        budget = chunk_budget(window, template_tokens, 0, map_params.max_new_tokens)
        chunk_cap = self.chunk_tokens or int(p.templates.get("chunk_tokens", 0))
        if chunk_cap:
            budget = min(budget, chunk_cap)
        chunks = chunk_document(document, llm, budget)
        return MapPlan(p, source, window, budget, chunks, map_params)

    def run(self, document: str, query: Query, llm: LLM) -> Answer:
        plan = self.plan(document, query, llm)
        p = plan.prompts
        stats = Stats()
        trace: list[TraceEvent] = []
        stats.extra.update(
            chunks=len(plan.chunks),
            chunk_budget=plan.budget,
            prompt_kind=p.kind,
            prompt_version=p.templates["version"],
        )
        found = run_map(self, llm, plan, query, stats, trace)  # one wave over all chunks
        kept = self.confident_records(found, p, stats)
        mark_floor_drops(trace, found, kept)
        kept, rounds = collapse(self, llm, p, plan.source, query, kept, plan.window, stats, trace)
        stats.extra["collapse_rounds"] = rounds
        answer = run_reduce(self, llm, p, query, kept, stats, trace)  # one call
        return Answer(answer, trace, stats)


def mark_floor_drops(trace: list[TraceEvent], found: list[Record], kept: list[Record]) -> None:
    """Name, on each map event, why the confidence floor dropped its finding (``unscored``:
    no score, under ``unscored=drop``; else ``confidence_floor``) for the evidence audit."""
    kept_ids = {id(r) for r in kept}
    why = {
        r.sources[0]: "unscored" if r.confidence is None else "confidence_floor"
        for r in found
        if id(r) not in kept_ids and r.sources
    }
    for event in trace:
        if event.stage == "map" and event.inputs and event.inputs[0] in why:
            event.output["dropped"] = why[event.inputs[0]]


__all__ = ["MapPlan", "MapReduce", "mark_floor_drops"]
