"""Confidence of MapReduce's records: the source a run reads it from, the follow-up that asks for
a score a reply left out, the floor under which findings are dropped, and what the kept records'
scores really came from."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chunkwise.llm import LLM, Completion, GenerationParams, Request
from chunkwise.strategies.base import Stats, TraceEvent
from chunkwise.strategies.mapreduce.prompts import Prompts
from chunkwise.strategies.protocol import Record, parse_confidence

if TYPE_CHECKING:
    from chunkwise.strategies.mapreduce.strategy import MapReduce

#: tokens a follow-up for a missing confidence field may write (" 4.5" and the turn's end)
ASK_CONFIDENCE_TOKENS = 4
#: the field a follow-up continues a reply with (what the chat prompts' format names it)
CONFIDENCE_HEADER = "Confidence Score:"


def confidence_source(requested: str, p: Prompts) -> str:
    """Where confidence comes from: the ``confidence`` option, or for ``auto`` the model's own
    score (chat) or its answer tokens' probability (base)."""
    if requested != "auto":
        return requested
    return "self" if p.kind == "chat" else "logprob"


def ask_confidences(
    mr: MapReduce,
    llm: LLM,
    p: Prompts,
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
    if not (mr.ask_confidence and p.with_confidence and source in ("self", "both")):
        return
    if not llm.continues_replies or mr.protocol != "structured":
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
        max_new_tokens=ASK_CONFIDENCE_TOKENS, temperature=mr.temperature, stop=("\n",)
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
    answers = mr.call(llm, asks, stats)
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


def min_confidence_for(mr: MapReduce, p: Prompts) -> float:
    """The confidence floor in force (0: none; always 0 under confidence=off)."""
    if not p.with_confidence:
        return 0.0
    return float(
        p.templates.get("min_confidence", 0) if mr.min_confidence == "auto" else mr.min_confidence
    )


def confident_records(
    mr: MapReduce, records: list[Record], p: Prompts, stats: Stats
) -> list[Record]:
    """Drop scored records under the confidence floor; when no scored record reaches it,
    keep the ``keep_when_all_low`` most confident. Records with no confidence are kept
    or dropped as ``unscored`` says, and counted either way."""
    floor = min_confidence_for(mr, p)
    if floor <= 0:
        return records
    scored = [r for r in records if r.confidence is not None]
    passing = [r for r in scored if r.confidence >= floor]
    if not passing and scored:
        passing = sorted(scored, key=lambda r: -r.confidence)[: mr.keep_when_all_low]
    unscored = [r for r in records if r.confidence is None]
    keep_ids = {id(r) for r in passing}
    if mr.unscored == "keep":
        keep_ids |= {id(r) for r in unscored}
    kept = [r for r in records if id(r) in keep_ids]  # document order
    stats.extra["low_confidence_dropped"] = len(scored) - len(passing)
    stats.extra["unscored_kept" if mr.unscored == "keep" else "unscored_dropped"] = len(unscored)
    return kept


def actual_source(requested: str, n: int, unscored: int) -> str:
    """What the kept map records' confidences really came from: the requested source, ``none``
    when no record got one, ``<source>+none`` when only some did."""
    if requested == "off" or (n and unscored == n):
        return "none"
    return requested if not unscored else f"{requested}+none"


__all__ = [
    "actual_source",
    "ask_confidences",
    "confidence_source",
    "confident_records",
    "min_confidence_for",
]
