"""LLM×MapReduce: map every chunk, collapse while the results do not fit, reduce once.

Map outputs follow the structured information protocol (:mod:`.protocol`) and are parsed;
records whose *answer* says NO INFORMATION are dropped; the rest are collapsed in document
order until they fit the reduce call; the reduce call resolves conflicts by confidence.
Confidence comes from the model's own 0-5 score (``self``), from the mean probability of the
answer tokens (``logprob``), or both; ``confidence=off`` neither asks for, shows nor uses one.
Chat models get the protocol as instructions; base models get completion scaffolds
(``prompts/mapreduce/base.yaml``).

Two separate ablation knobs: ``calibration=false`` removes exactly the in-context calibration
block (scoring principles and worked example) from the map, collapse and reduce prompts and
changes nothing else; ``confidence=off`` removes the confidence score itself (not requested,
not shown to collapse/reduce, no floor, no confidence ordering).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any

from chunkwise.errors import BadInput, ChunkwiseError
from chunkwise.llm import LLM, Completion, GenerationParams, Request
from chunkwise.prompts import load_text, prompt_set
from chunkwise.strategies.base import Answer, Query, Stats, Strategy, TraceEvent, register
from chunkwise.strategies.grounding import is_grounded, misquotes, snap_answer
from chunkwise.strategies.protocol import (
    NO_INFO,
    Record,
    missing_answer,
    parse_confidence,
    parse_record,
    render_record,
)
from chunkwise.text import chunk_budget, chunk_document, middle_truncate

log = logging.getLogger(__name__)

#: stop sequence for early stopping: the answer field saying there is nothing in this chunk
NO_INFO_STOP = f"Answer: {NO_INFO}"
#: tokens a follow-up for a missing confidence field may write (" 4.5" and the turn's end)
ASK_CONFIDENCE_TOKENS = 4
#: the field a follow-up continues a reply with (what the chat prompts' format names it)
CONFIDENCE_HEADER = "Confidence Score:"
NO_RELEVANT = "No part of the document was found to contain information relevant to the question."


class CollapseError(ChunkwiseError):
    """Collapse did not bring the records under the reduce budget within its round limit."""


@dataclass
class _Prompts:
    kind: str
    templates: dict[str, Any]
    calibration: str
    #: the query's answer prefix; base-model findings are shown as "<prefix> <answer>"
    answer_prefix: str = ""
    #: whether prompts ask for, show and use a confidence score (``confidence`` != off)
    with_confidence: bool = True

    def render(self, name: str, **values: str) -> str:
        values.setdefault("answer_prefix", "Answer:")
        prefix = "conf_" if self.with_confidence else "noconf_"
        for slot in CONFIDENCE_SLOTS:
            values.setdefault(f"conf_{slot}", str(self.templates.get(prefix + slot, "")))
        values.setdefault("hint", self.templates.get("hint", ""))  # a task's own hint wins
        text = self.templates[name].format(calibration=self.calibration, **values)
        # No trailing space after a final "Answer:": sentencepiece tokenizers attach the
        # space to the answer's first token, and a dangling space derails base models.
        return "\n".join(line.rstrip() for line in text.splitlines()).strip()


@dataclass
class MapPlan:
    """What a run decides before the first call: prompts, confidence source, chunks."""

    prompts: _Prompts
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
    max_collapse_rounds bound on collapse rounds, then an error
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
        max_new_tokens: int = 0,
    ):
        super().__init__(window)
        if max_new_tokens < 0:
            raise BadInput(f"mapreduce option max_new_tokens={max_new_tokens}: expected >= 0")
        self.max_new_tokens = max_new_tokens
        for opt, value, allowed in (
            ("protocol", protocol, ("structured", "plain")),
            ("confidence", confidence, ("auto", "self", "logprob", "both", "off")),
            ("unscored", unscored, ("keep", "drop")),
            ("prompts", prompts, ("auto", "chat", "base")),
            ("reduce_order", reduce_order, ("auto", "document", "confidence")),
        ):
            if value not in allowed:
                raise BadInput(f"mapreduce option {opt}={value!r}; valid: {', '.join(allowed)}")
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

    # -- set-up ---------------------------------------------------------------------------
    def _prompts(self, llm: LLM, family: str) -> _Prompts:
        kind = self.prompts if self.prompts != "auto" else ("chat" if llm.chat else "base")
        return self.prompt_set(kind, family)

    # -- prompts, public so that training renders exactly what decoding sends --------------
    def prompt_set(self, kind: str, family: str) -> _Prompts:
        """The prompt set for a model kind (``chat`` | ``base``) and task family."""
        templates = prompt_set("mapreduce", kind, family)
        with_conf = self.confidence != "off" and self.protocol == "structured"
        calibration = ""
        if self.calibration and with_conf:
            calibration = templates.get("calibration") or load_text("mapreduce/calibration.txt")
            if templates.get("calibration_rule"):
                calibration += "\n" + str(templates["calibration_rule"])
        return _Prompts(kind, templates, calibration, with_confidence=with_conf)

    def map_prompt(self, p: _Prompts, chunk: str, query: Query) -> str:
        return p.render(self._template("map"), chunk=chunk, **_q(query))

    def collapse_prompt(self, p: _Prompts, records: list[Record], query: Query) -> str:
        p = replace(p, answer_prefix=query.answer_prefix)
        return p.render(
            self._template("collapse"), records=self._render_all(records, p), **_q(query)
        )

    def reduce_prompt(self, p: _Prompts, records: list[Record], query: Query) -> str:
        p = replace(p, answer_prefix=query.answer_prefix)
        return p.render(
            self._template("reduce"), records=self._render_for_reduce(records, p), **_q(query)
        )

    def record_target(self, p: _Prompts, record: Record) -> str:
        """What a map or collapse call should output for ``record`` (a training target)."""
        if self.protocol == "plain" or p.kind == "base":
            return " " + (record.answer or record.extracted_information or NO_INFO).strip()
        return render_record(record, with_confidence=p.with_confidence)

    def _confidence_source(self, p: _Prompts) -> str:
        if self.confidence != "auto":
            return self.confidence
        return "self" if p.kind == "chat" else "logprob"

    @staticmethod
    def _no_info_stop(p: _Prompts) -> str:
        """The early-stop string of a map call: a base scaffold already ends in the answer's
        prefix ("Answer:"), so only the marker itself can follow; a chat reply writes the field."""
        return NO_INFO if p.kind == "base" else NO_INFO_STOP

    def _params(self, p: _Prompts, stage: str, want_logprobs: bool) -> GenerationParams:
        stop = list(p.templates.get(f"{stage}_stop", []))
        if stage == "map" and self.early_stop and self.protocol == "structured":
            stop.append(self._no_info_stop(p))
        return GenerationParams(
            max_new_tokens=self._cap(int(p.templates[f"{stage}_max_new_tokens"])),
            temperature=self.temperature,
            stop=tuple(stop),
            logprobs=want_logprobs,
        )

    def _cap(self, n: int) -> int:
        return min(n, self.max_new_tokens) if self.max_new_tokens else n

    @staticmethod
    def _request(llm: LLM, text: str, params: GenerationParams) -> Request:
        return Request(llm.as_prompt(text), params)

    def _template(self, name: str) -> str:
        return f"plain_{name}" if self.protocol == "plain" else name

    # -- the pipeline ---------------------------------------------------------------------
    def plan(self, document: str, query: Query, llm: LLM) -> MapPlan:
        """The prompt set, chunk budget and chunks a run on ``llm`` uses (public so that a
        teacher renders exactly the chunks and prompts decoding sends)."""
        p = replace(self._prompts(llm, query.task), answer_prefix=query.answer_prefix)
        source = self._confidence_source(p)
        window = self.effective_window(llm)
        map_params = self._params(p, "map", source in ("logprob", "both"))
        template_tokens = llm.prompt_tokens(llm.as_prompt(self.map_prompt(p, "", query)))
        budget = chunk_budget(window, template_tokens, 0, map_params.max_new_tokens)
        chunk_cap = self.chunk_tokens or int(p.templates.get("chunk_tokens", 0))
        if chunk_cap:
            budget = min(budget, chunk_cap)
        chunks = chunk_document(document, llm, budget)
        return MapPlan(p, source, window, budget, chunks, map_params)

    def run(self, document: str, query: Query, llm: LLM) -> Answer:
        plan = self.plan(document, query, llm)
        p, source, window, budget, chunks = (
            plan.prompts,
            plan.source,
            plan.window,
            plan.budget,
            plan.chunks,
        )
        map_params = plan.map_params
        stats = Stats()
        trace: list[TraceEvent] = []
        stats.extra.update(
            chunks=len(chunks),
            chunk_budget=budget,
            prompt_kind=p.kind,
            prompt_version=p.templates["version"],
        )

        # map: one wave over all chunks
        requests = [
            self._request(llm, self.map_prompt(p, c.text, query), map_params) for c in chunks
        ]
        outs = self.call(llm, requests, stats)
        records = [
            self._record(out, p, source, [c.index]) for c, out in zip(chunks, outs, strict=True)
        ]
        early = sum(out.stop_reason == self._no_info_stop(p) for out in outs)
        self._ask_confidences(llm, p, "map", source, requests, outs, records, stats, trace)
        snapped = self._snap(p, chunks, records)
        for c, rec, out in zip(chunks, records, outs, strict=True):
            trace.append(self._event("map", [c.index], rec, out))
        ungrounded = self._ungrounded(p, chunks, records)
        misquoted = self._misquoted(query, chunks, records)
        dropped = ungrounded | misquoted
        kept = [r for i, r in enumerate(records) if not r.no_information and i not in dropped]
        unscored = sum(r.confidence is None for r in kept)
        stats.extra.update(
            map_no_information=sum(r.no_information for r in records),
            early_stops=early,
            map_truncated=sum(r.truncated for r in records),
            map_no_answer=sum(r.answer is None and not r.no_information for r in records),
            map_ungrounded=len(ungrounded),
            ungrounded_parts=sorted(chunks[i].index for i in ungrounded),
            map_misquoted=len(misquoted),
            misquoted_parts=sorted(chunks[i].index for i in misquoted),
            map_snapped=len(snapped),
            snapped_parts=sorted(chunks[i].index for i in snapped),
            confidence_requested=source,
            confidence_source=_actual_source(source, len(kept), unscored),
            unscored_records=unscored,
        )
        kept = self.confident_records(kept, p, stats)

        kept, rounds = self._collapse(llm, p, source, query, kept, window, stats, trace)
        stats.extra["collapse_rounds"] = rounds

        # reduce: one call, never on an empty context
        reduce_params = self._params(p, "reduce", False)
        if query.max_answer_tokens:
            reduce_params = reduce_params.with_(
                max_new_tokens=max(reduce_params.max_new_tokens, query.max_answer_tokens)
            )
        prompt = self.reduce_prompt(p, kept, query)
        out = self.call(llm, [self._request(llm, prompt, reduce_params)], stats)[0]
        final = parse_record(out.text, answer_only=True)
        # answer_only parses header-free text as the answer, so None means the output had
        # fields (a rationale) but no answer: never hand the rationale back as the answer
        answer = final.answer if final.answer is not None else ""
        value = self._snap_reduce(p, answer, kept)
        answer = value if value is not None else answer
        stats.extra["reduce_snapped"] = value is not None
        stats.extra["reduce_no_answer"] = final.answer is None
        stats.extra["reduce_truncated"] = out.finish_reason == "length"
        trace.append(
            TraceEvent(
                "reduce",
                sorted({s for r in kept for s in r.sources}),
                {
                    "raw": out.text,
                    "answer": answer,
                    "rationale": final.rationale,
                    "finish_reason": out.finish_reason,
                },
                out.prompt_tokens,
                out.completion_tokens,
                out.latency_s,
            )
        )
        return Answer(answer, trace, stats)

    def min_confidence_for(self, p: _Prompts) -> float:
        """The confidence floor in force (0: none; always 0 under confidence=off)."""
        if not p.with_confidence:
            return 0.0
        return float(
            p.templates.get("min_confidence", 0)
            if self.min_confidence == "auto"
            else self.min_confidence
        )

    def confident_records(self, records: list[Record], p: _Prompts, stats: Stats) -> list[Record]:
        """Drop scored records under the confidence floor; when no scored record reaches it,
        keep the ``keep_when_all_low`` most confident. Records with no confidence are kept
        or dropped as ``unscored`` says, and counted either way."""
        floor = self.min_confidence_for(p)
        if floor <= 0:
            return records
        scored = [r for r in records if r.confidence is not None]
        passing = [r for r in scored if r.confidence >= floor]
        if not passing and scored:
            passing = sorted(scored, key=lambda r: -r.confidence)[: self.keep_when_all_low]
        unscored = [r for r in records if r.confidence is None]
        keep_ids = {id(r) for r in passing}
        if self.unscored == "keep":
            keep_ids |= {id(r) for r in unscored}
        kept = [r for r in records if id(r) in keep_ids]  # document order
        stats.extra["low_confidence_dropped"] = len(scored) - len(passing)
        stats.extra["unscored_kept" if self.unscored == "keep" else "unscored_dropped"] = len(
            unscored
        )
        return kept

    def _record(self, out: Completion, p: _Prompts, source: str, sources: list[int]) -> Record:
        text = out.text
        if out.stop_reason == self._no_info_stop(p):
            text += out.stop_reason  # the early stop cut the marker off: put it back for the parser
        if self.protocol == "plain":
            rec = Record(
                extracted_information=text.strip(),
                answer=text.strip(),
                raw=text,
                no_information=NO_INFO.lower() in text.lower() or not text.strip(),
            )
        else:
            rec = parse_record(text, answer_only=p.kind == "base")
        rec.sources = list(sources)
        rec.truncated = out.finish_reason == "length"
        if source == "off":
            rec.confidence = None
            return rec
        lp = None
        if source in ("logprob", "both") and rec.answer and out.token_logprobs is not None:
            start = out.text.find(rec.answer)
            if start >= 0:
                prob = out.mean_token_prob(start, start + len(rec.answer))
                lp = None if prob is None else round(5.0 * prob, 3)
        if source == "logprob":
            rec.confidence = lp
        elif source == "both" and lp is not None:
            rec.confidence = lp if rec.confidence is None else round((rec.confidence + lp) / 2, 3)
        return rec

    def _ask_confidences(
        self,
        llm: LLM,
        p: _Prompts,
        stage: str,
        source: str,
        requests: list[Request],
        outs: list[Completion],
        records: list[Record],
        stats: Stats,
        trace: list[TraceEvent],
    ) -> None:
        """A finding whose reply ended on its own (not cut by ``max_new_tokens``) without the
        confidence field: continue that very reply with the field's header and read the score
        from the model's next few tokens. The score is still the model's own text, given the
        evidence it just wrote; the reply itself (``raw``) is left as written. Off unless
        confidence comes from the text (``self``/``both``) and ``ask_confidence`` is on."""
        if not (self.ask_confidence and p.with_confidence and source in ("self", "both")):
            return
        if not llm.continues_replies or self.protocol != "structured":
            return
        todo = [
            i
            for i, (out, rec) in enumerate(zip(outs, records, strict=True))
            if rec.confidence is None
            and rec.answer is not None
            and not rec.no_information
            and out.finish_reason == "stop"
        ]
        if not todo:
            return
        params = GenerationParams(
            max_new_tokens=ASK_CONFIDENCE_TOKENS, temperature=self.temperature, stop=("\n",)
        )
        asks = [
            Request(
                llm.continue_reply(
                    requests[i].prompt, outs[i].text.rstrip() + "\n" + CONFIDENCE_HEADER
                ),
                params,
            )
            for i in todo
        ]
        answers = self.call(llm, asks, stats)
        filled = 0
        for i, ans in zip(todo, answers, strict=True):
            value = parse_confidence(ans.text)
            rec = records[i]
            if value is not None:
                rec.confidence = value
                filled += 1
            trace.append(
                TraceEvent(
                    "ask_confidence",
                    list(rec.sources),
                    {"of": stage, "text": ans.text, "confidence": value},
                    ans.prompt_tokens,
                    ans.completion_tokens,
                    ans.latency_s,
                )
            )
        stats.extra["confidence_asked"] = stats.extra.get("confidence_asked", 0) + len(todo)
        stats.extra["confidence_filled"] = stats.extra.get("confidence_filled", 0) + filled

    def _snaps(self, p: _Prompts) -> bool:
        """Whether slipped values snap: ``snap_quotes`` and ``grounding`` on, for a family whose
        findings are quotes (``grounding: quote``)."""
        return self.snap_quotes and self.grounding and p.templates.get("grounding") == "quote"

    def _snap(self, p: _Prompts, chunks: list[Any], records: list[Record]) -> set[int]:
        """With ``snap_quotes`` (and ``grounding``) on, map answers that nearly copy a value of
        their chunk (an edge or count slip) take that value (:func:`.grounding.snap_answer`;
        the record's ``raw`` keeps what the model wrote); returns the indices snapped."""
        if not self._snaps(p):
            return set()
        out = set()
        for i, (c, r) in enumerate(zip(chunks, records, strict=True)):
            value = None if r.no_information else snap_answer(r.answer, c.text)
            if value is not None:
                r.answer = value
                out.add(i)
        return out

    def _snap_reduce(self, p: _Prompts, answer: str, kept: list[Record]) -> str | None:
        """With ``snap_quotes`` on, the value of a finding that the reduce answer nearly copies
        (an edge or count slip, :func:`.grounding.snap_answer`), else None: a model that slips
        copying a value in map slips again copying it into its answer. The trace's ``raw``
        keeps what the model wrote."""
        if not self._snaps(p):
            return None
        values = "\n".join(r.answer for r in kept if r.answer)
        return snap_answer(answer, values) if values else None

    def _ungrounded(self, p: _Prompts, chunks: list[Any], records: list[Record]) -> set[int]:
        """Map findings not taken from their chunk (:mod:`.grounding`), where the prompt set's
        family says findings are quotes (``grounding: quote``) and ``grounding`` is on."""
        if not self.grounding or p.templates.get("grounding") != "quote":
            return set()
        return {
            i
            for i, (c, r) in enumerate(zip(chunks, records, strict=True))
            if not r.no_information and not is_grounded(r.extracted_information, r.answer, c.text)
        }

    def _misquoted(self, query: Query, chunks: list[Any], records: list[Record]) -> set[int]:
        """With ``anchor_quotes`` on, map findings that reproduce a phrase the question quotes
        from a chunk that does not hold it (:func:`.grounding.misquotes`)."""
        if not self.anchor_quotes:
            return set()
        return {
            i
            for i, (c, r) in enumerate(zip(chunks, records, strict=True))
            if not r.no_information
            and misquotes(query.question, r.extracted_information, r.answer, c.text)
        }

    @staticmethod
    def _event(
        stage: str, inputs: list[int], rec: Record, out: Completion, rnd: int = 0
    ) -> TraceEvent:
        return TraceEvent(
            stage,
            inputs,
            rec.to_dict(),
            out.prompt_tokens,
            out.completion_tokens,
            out.latency_s,
            rnd,
        )

    def _render(self, r: Record, p: _Prompts) -> str:
        """One record as the collapse and reduce stages see it (label included)."""
        with_conf = p.with_confidence and r.confidence is not None
        key = "record" if with_conf else "record_no_confidence"
        template = p.templates.get(key) if self.protocol == "structured" else None
        if template:
            answer = (r.answer if r.answer is not None else missing_answer(r)).strip()
            if p.answer_prefix and r.answer:
                answer = f"{p.answer_prefix} {answer}"
            return template.format(
                parts=_parts(r),
                answer=answer,
                confidence=f"{r.confidence:.1f}" if with_conf else "",
                info=r.extracted_information,
            )
        body = render_record(r, with_confidence=with_conf, structured=self.protocol == "structured")
        label = "part" if len(r.sources) == 1 else "parts"
        return f"Findings from {label} {_parts(r)}:\n{body}"

    def _render_all(self, records: list[Record], p: _Prompts, order: str = "document") -> str:
        if order == "confidence":  # most confident last, nearest the question
            records = sorted(
                records, key=lambda r: r.confidence if r.confidence is not None else -1
            )
        return p.templates.get("record_separator", "\n\n").join(self._render(r, p) for r in records)

    def _render_for_reduce(self, records: list[Record], p: _Prompts) -> str:
        if not records:
            return NO_RELEVANT
        order = self.reduce_order
        if order == "auto":
            order = "confidence" if p.kind == "base" and p.with_confidence else "document"
        if not p.with_confidence:
            order = "document"
        return self._render_all(records, p, order)

    def _collapse(
        self,
        llm: LLM,
        p: _Prompts,
        source: str,
        query: Query,
        records: list[Record],
        window: int,
        stats: Stats,
        trace: list[TraceEvent],
    ) -> tuple[list[Record], int]:
        reduce_new = self._cap(int(p.templates["reduce_max_new_tokens"]))
        reduce_tokens = llm.prompt_tokens(
            llm.as_prompt(p.render(self._template("reduce"), records="", **_q(query)))
        )
        reduce_budget = chunk_budget(window, reduce_tokens, 0, reduce_new)
        collapse_params = self._params(p, "collapse", source in ("logprob", "both"))
        collapse_tokens = llm.prompt_tokens(
            llm.as_prompt(p.render(self._template("collapse"), records="", **_q(query)))
        )
        group_budget = chunk_budget(window, collapse_tokens, 0, collapse_params.max_new_tokens)

        rounds = 0
        while True:
            rendered = [self._render(r, p) for r in records]
            sizes = [llm.count_tokens(t) + 2 for t in rendered]
            if sum(sizes) <= reduce_budget:
                return records, rounds
            if rounds >= self.max_collapse_rounds:
                raise CollapseError(
                    f"after {rounds} collapse rounds the {len(records)} records still take "
                    f"{sum(sizes)} tokens, over the reduce budget of {reduce_budget}; raise "
                    "max_collapse_rounds, the context window, or lower the map output budget"
                )
            rounds += 1
            groups = pack_groups(sizes, group_budget)
            requests = []
            for g in groups:
                parts = []
                for i in g:
                    text = rendered[i]
                    if sizes[i] > group_budget:
                        log.warning(
                            "a record of %d tokens exceeds the collapse budget of %d; "
                            "truncating it in the middle",
                            sizes[i],
                            group_budget,
                        )
                        text, _ = middle_truncate(text, llm, group_budget - 2)
                    parts.append(text)
                sep = p.templates.get("record_separator", "\n\n")
                prompt = p.render(
                    self._template("collapse"), records=sep.join(parts), **_q(query)
                )  # == collapse_prompt() unless truncated
                requests.append(self._request(llm, prompt, collapse_params))
            outs = self.call(llm, requests, stats)
            collapsed = [
                self._record(out, p, source, sorted({s for i in g for s in records[i].sources}))
                for g, out in zip(groups, outs, strict=True)
            ]
            self._ask_confidences(
                llm, p, "collapse", source, requests, outs, collapsed, stats, trace
            )
            merged = []
            for g, out, rec in zip(groups, outs, collapsed, strict=True):
                inputs = [records[i] for i in g]
                if rec.confidence is None and p.with_confidence:
                    rec.confidence = _combined_confidence(rec, inputs)
                trace.append(self._event("collapse", rec.sources, rec, out, rounds))
                if not rec.no_information:
                    merged.append(rec)
            records = merged


#: prompt slots that differ between confidence on and off (``conf_<slot>`` / ``noconf_<slot>``)
CONFIDENCE_SLOTS = ("step", "format", "findings", "collapse_rule", "collapse_step", "reduce_rule")


def pack_groups(sizes: list[int], budget: int) -> list[list[int]]:
    """Consecutive records, in order, packed into groups of at most ``budget`` tokens: a group
    closes when the next record would overflow it; a record over the budget alone is a group of
    its own (the caller truncates it)."""
    groups: list[list[int]] = []
    used = 0
    for i, n in enumerate(sizes):
        if groups and used + n <= budget:
            groups[-1].append(i)
            used += n
        else:
            groups.append([i])
            used = n
    return groups


def _actual_source(requested: str, n: int, unscored: int) -> str:
    """What the kept map records' confidences really came from: the requested source, ``none``
    when no record got one, ``<source>+none`` when only some did."""
    if requested == "off" or (n and unscored == n):
        return "none"
    return requested if not unscored else f"{requested}+none"


def _q(query: Query) -> dict[str, str]:
    values = {"question": query.render(), "answer_prefix": query.answer_prefix or "Answer:"}
    if query.hint is not None:
        values["hint"] = query.hint
    return values


def _parts(r: Record) -> str:
    return ", ".join(str(i + 1) for i in r.sources)


def _norm(s: str | None) -> str:
    return " ".join((s or "").lower().split()).strip(" .")


def _combined_confidence(rec: Record, inputs: list[Record]) -> float | None:
    """Re-estimate a collapsed record's confidence from its inputs: the best confidence among
    inputs that gave the same answer, else the mean of the inputs' confidences."""
    same = [
        r.confidence
        for r in inputs
        if r.confidence is not None and _norm(r.answer) == _norm(rec.answer)
    ]
    if same:
        return max(same)
    known = [r.confidence for r in inputs if r.confidence is not None]
    return round(sum(known) / len(known), 3) if known else None


def to_intermediate(answer: Answer) -> dict[str, Any]:
    """The Pyramid-Align ``intermediate`` (M): map records, then collapse rounds."""
    out: dict[str, Any] = {"map": [], "collapse": []}
    for e in answer.trace:
        if e.stage == "map":
            out["map"].append(e.output)
        elif e.stage == "collapse":
            while len(out["collapse"]) < e.round:
                out["collapse"].append([])
            out["collapse"][e.round - 1].append(e.output)
    return out
