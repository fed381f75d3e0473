"""MapReduce's map stage: one wave of calls over every chunk, each reply read as a record, then
the checks that drop findings not taken from their chunk or repair slipped values
(:mod:`chunkwise.strategies.grounding`) and those that echo the question
(:mod:`chunkwise.strategies.mapreduce.echo`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from chunkwise.llm import LLM
from chunkwise.strategies.base import Query, Stats, TraceEvent
from chunkwise.strategies.grounding import is_grounded, misquotes, snap_answer
from chunkwise.strategies.mapreduce.confidence import actual_source, ask_confidences
from chunkwise.strategies.mapreduce.echo import echoed_span
from chunkwise.strategies.mapreduce.prompts import Prompts, as_request, map_prompt
from chunkwise.strategies.mapreduce.replies import no_info_stop, parse_reply, record_event
from chunkwise.strategies.protocol import Record

if TYPE_CHECKING:
    from chunkwise.strategies.mapreduce.strategy import MapPlan, MapReduce


def run_map(
    mr: MapReduce, llm: LLM, plan: MapPlan, query: Query, stats: Stats, trace: list[TraceEvent]
) -> list[Record]:
    """Map every chunk of ``plan`` in one wave; the findings kept (not NO INFORMATION, not
    dropped by a grounding check), in document order, with their counts in ``stats``."""
    p, source, chunks = plan.prompts, plan.source, plan.chunks
    requests = [as_request(llm, map_prompt(p, c.text, query), plan.map_params) for c in chunks]
    outs = mr.call(llm, requests, stats)
    records = [parse_reply(out, p, source, [c.index]) for c, out in zip(chunks, outs, strict=True)]
    early = sum(out.stop_reason == no_info_stop(p) for out in outs)
    ask_confidences(mr, llm, p, "map", source, requests, outs, records, stats, trace)
    snapped = snap(mr, p, chunks, records)
    ungrounded_ = ungrounded(mr, p, chunks, records)
    misquoted_ = misquoted(mr, query, chunks, records)
    echoes = question_echoes(mr, query, chunks, records)
    dropped = ungrounded_ | misquoted_ | echoes
    # the most specific reason first: an echo from a chunk without it is ungrounded too
    reasons = (("question_echo", echoes), ("ungrounded", ungrounded_), ("misquoted", misquoted_))
    for i, (c, rec, out) in enumerate(zip(chunks, records, outs, strict=True)):
        event = record_event("map", [c.index], rec, out)
        # for the evidence audit: which characters the call read, and why its finding was
        # dropped (the confidence floor marks its own in strategy.run)
        event.output["span"] = [c.start_char, c.end_char]
        if i in dropped:
            event.output["dropped"] = next(why for why, where in reasons if i in where)
        trace.append(event)
    kept = [r for i, r in enumerate(records) if not r.no_information and i not in dropped]
    unscored = sum(r.confidence is None for r in kept)
    stats.extra.update(
        map_no_information=sum(r.no_information for r in records),
        early_stops=early,
        map_truncated=sum(r.truncated for r in records),
        map_no_answer=sum(r.answer is None and not r.no_information for r in records),
        map_ungrounded=len(ungrounded_),
        ungrounded_parts=sorted(chunks[i].index for i in ungrounded_),
        map_misquoted=len(misquoted_),
        misquoted_parts=sorted(chunks[i].index for i in misquoted_),
        map_question_echo=len(echoes),
        question_echo_parts=sorted(chunks[i].index for i in echoes),
        map_snapped=len(snapped),
        snapped_parts=sorted(chunks[i].index for i in snapped),
        confidence_requested=source,
        confidence_source=actual_source(source, len(kept), unscored),
        unscored_records=unscored,
    )
    return kept


def snaps(mr: MapReduce, p: Prompts) -> bool:
    """Whether slipped values snap: ``snap_quotes`` and ``grounding`` on, for a family whose
    findings are quotes (``grounding: quote``)."""
    return mr.snap_quotes and mr.grounding and p.templates.get("grounding") == "quote"


def snap(mr: MapReduce, p: Prompts, chunks: list[Any], records: list[Record]) -> set[int]:
    """With ``snap_quotes`` (and ``grounding``) on, map answers that nearly copy a value of
    their chunk (an edge or count slip) take that value (:func:`.grounding.snap_answer`;
    the record's ``raw`` keeps what the model wrote); returns the indices snapped."""
    if not snaps(mr, p):
        return set()
    out = set()
    for i, (c, r) in enumerate(zip(chunks, records, strict=True)):
        value = None if r.no_information else snap_answer(r.answer, c.text)
        if value is not None:
            r.answer = value
            out.add(i)
    return out


def ungrounded(mr: MapReduce, p: Prompts, chunks: list[Any], records: list[Record]) -> set[int]:
    """Map findings not taken from their chunk (:mod:`.grounding`), where the prompt set's
    family says findings are quotes (``grounding: quote``) and ``grounding`` is on."""
    if not mr.grounding or p.templates.get("grounding") != "quote":
        return set()
    return {
        i
        for i, (c, r) in enumerate(zip(chunks, records, strict=True))
        if not r.no_information and not is_grounded(r.extracted_information, r.answer, c.text)
    }


def misquoted(mr: MapReduce, query: Query, chunks: list[Any], records: list[Record]) -> set[int]:
    """With ``anchor_quotes`` on, map findings that reproduce a phrase the question quotes
    from a chunk that does not hold it (:func:`.grounding.misquotes`)."""
    if not mr.anchor_quotes:
        return set()
    return {
        i
        for i, (c, r) in enumerate(zip(chunks, records, strict=True))
        if not r.no_information
        and misquotes(query.question, r.extracted_information, r.answer, c.text)
    }


def question_echoes(
    mr: MapReduce, query: Query, chunks: list[Any], records: list[Record]
) -> set[int]:
    """With ``echo_check`` on, map findings whose answer echoes a span the question quotes
    from a chunk that holds neither (:func:`.echo.echoed_span`)."""
    if not mr.echo_check:
        return set()
    return {
        i
        for i, (c, r) in enumerate(zip(chunks, records, strict=True))
        if not r.no_information and echoed_span(query.question, r.answer, c.text) is not None
    }


__all__ = ["misquoted", "question_echoes", "run_map", "snap", "snaps", "ungrounded"]
