"""MapReduce's reduce stage: one call over the kept records (never on an empty context: with none
it is told nothing relevant was found), its answer parsed and, with ``snap_quotes``, snapped to
the finding it nearly copies; with ``echo_check``, an answer that echoes the question from
findings that do not hold it becomes ``[NO INFORMATION]``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chunkwise.llm import LLM
from chunkwise.strategies.base import Query, Stats, TraceEvent
from chunkwise.strategies.grounding import snap_answer
from chunkwise.strategies.mapreduce.echo import echoed_span
from chunkwise.strategies.mapreduce.map_stage import snaps
from chunkwise.strategies.mapreduce.prompts import Prompts, as_request, reduce_prompt
from chunkwise.strategies.protocol import NO_INFO, Record, parse_record

if TYPE_CHECKING:
    from chunkwise.strategies.mapreduce.strategy import MapReduce


def run_reduce(
    mr: MapReduce,
    llm: LLM,
    p: Prompts,
    query: Query,
    kept: list[Record],
    stats: Stats,
    trace: list[TraceEvent],
) -> str:
    """The final answer from ``kept``; the call's counts go to ``stats``, its event to
    ``trace``."""
    reduce_params = mr.stage_params(p, "reduce", False)
    if query.max_answer_tokens:
        reduce_params = reduce_params.with_(
            max_new_tokens=max(reduce_params.max_new_tokens, query.max_answer_tokens)
        )
    prompt = reduce_prompt(p, kept, query, mr.reduce_order)
    out = mr.call(llm, [as_request(llm, prompt, reduce_params)], stats)[0]
    final = parse_record(out.text, answer_only=True)
    # answer_only parses header-free text as the answer, so None means the output had
    # fields (a rationale) but no answer: never hand the rationale back as the answer
    answer = final.answer if final.answer is not None else ""
    value = snap_reduce(mr, p, answer, kept)
    answer = value if value is not None else answer
    echo = reduce_echo(mr, query, answer, kept)
    if echo is not None:
        answer = NO_INFO
    stats.extra["reduce_snapped"] = value is not None
    stats.extra["reduce_question_echo"] = echo is not None
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
                **({"question_echo": echo} if echo is not None else {}),
            },
            out.prompt_tokens,
            out.completion_tokens,
            out.latency_s,
        )
    )
    return answer


def snap_reduce(mr: MapReduce, p: Prompts, answer: str, kept: list[Record]) -> str | None:
    """With ``snap_quotes`` on, the value of a finding that the reduce answer nearly copies
    (an edge or count slip, :func:`.grounding.snap_answer`), else None: a model that slips
    copying a value in map slips again copying it into its answer. The trace's ``raw``
    keeps what the model wrote."""
    if not snaps(mr, p):
        return None
    values = "\n".join(r.answer for r in kept if r.answer)
    return snap_answer(answer, values) if values else None


def reduce_echo(mr: MapReduce, query: Query, answer: str, kept: list[Record]) -> str | None:
    """With ``echo_check`` on, the span the question quotes that the reduce answer echoes
    although no finding it was sent holds that span or the answer (:func:`.echo.echoed_span`
    over the findings' text), else None. Sent nothing, a model can still copy the question:
    the official kv question's key came back as the answer (issue #49), and an extractive
    question's quoted phrase."""
    if not mr.echo_check:
        return None
    sent = "\n".join(f"{r.extracted_information or ''} {r.answer or ''}" for r in kept)
    return echoed_span(query.question, answer, sent)


__all__ = ["reduce_echo", "run_reduce", "snap_reduce"]
