"""A map or collapse reply read as a :class:`Record`: its fields parsed (structured or plain),
its confidence taken from the model's own score, its answer tokens' probability, or both."""

from __future__ import annotations

from chunkwise.llm import Completion
from chunkwise.strategies.base import TraceEvent
from chunkwise.strategies.mapreduce.prompts import Prompts
from chunkwise.strategies.protocol import NO_INFO, Record, parse_record

#: stop sequence for early stopping: the answer field saying there is nothing in this chunk
NO_INFO_STOP = f"Answer: {NO_INFO}"


def no_info_stop(p: Prompts) -> str:
    """The early-stop string of a map call: a base scaffold already ends in the answer's
    prefix ("Answer:"), so only the marker itself can follow; a chat reply writes the field."""
    return NO_INFO if p.kind == "base" else NO_INFO_STOP


def parse_reply(out: Completion, p: Prompts, source: str, sources: list[int]) -> Record:
    """``out`` as a record of chunks ``sources``, its confidence from ``source`` (self,
    logprob, both or off)."""
    text = out.text
    if out.stop_reason == no_info_stop(p):
        text += out.stop_reason  # the early stop cut the marker off: put it back for the parser
    if p.protocol == "plain":
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


def record_event(
    stage: str, inputs: list[int], rec: Record, out: Completion, rnd: int = 0
) -> TraceEvent:
    """The trace event of the call that wrote ``rec``."""
    return TraceEvent(
        stage,
        inputs,
        rec.to_dict(),
        out.prompt_tokens,
        out.completion_tokens,
        out.latency_s,
        rnd,
    )


__all__ = ["NO_INFO_STOP", "no_info_stop", "parse_reply", "record_event"]
