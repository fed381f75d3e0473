"""MapReduce's collapse stage: while the kept records do not fit the reduce call, pack consecutive
ones into groups that fit a collapse call and merge each group into one record."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from chunkwise.errors import ChunkwiseError
from chunkwise.llm import LLM
from chunkwise.strategies.base import Query, Stats, TraceEvent
from chunkwise.strategies.mapreduce.confidence import ask_confidences
from chunkwise.strategies.mapreduce.prompts import (
    Prompts,
    as_request,
    question_values,
    show_record,
)
from chunkwise.strategies.mapreduce.replies import parse_reply, record_event
from chunkwise.strategies.protocol import Record
from chunkwise.text import chunk_budget, middle_truncate

if TYPE_CHECKING:
    from chunkwise.strategies.mapreduce.strategy import MapReduce

log = logging.getLogger(__name__)


class CollapseError(ChunkwiseError):
    """Collapse did not bring the records under the reduce budget within its round limit."""


def collapse(
    mr: MapReduce,
    llm: LLM,
    p: Prompts,
    source: str,
    query: Query,
    records: list[Record],
    window: int,
    stats: Stats,
    trace: list[TraceEvent],
) -> tuple[list[Record], int]:
    """``records`` merged until they fit the reduce call, and the rounds that took; raises
    :class:`CollapseError` after ``max_collapse_rounds`` rounds."""
    reduce_new = mr.cap(int(p.templates["reduce_max_new_tokens"]))
    reduce_tokens = llm.prompt_tokens(
        llm.as_prompt(p.render(p.template("reduce"), records="", **question_values(query)))
    )
    reduce_budget = chunk_budget(window, reduce_tokens, 0, reduce_new)
    collapse_params = mr.stage_params(p, "collapse", source in ("logprob", "both"))
    collapse_tokens = llm.prompt_tokens(
        llm.as_prompt(p.render(p.template("collapse"), records="", **question_values(query)))
    )
    group_budget = chunk_budget(window, collapse_tokens, 0, collapse_params.max_new_tokens)

    rounds = 0
    while True:
        rendered = [show_record(r, p) for r in records]
        sizes = [llm.count_tokens(t) + 2 for t in rendered]
        if sum(sizes) <= reduce_budget:
            return records, rounds
        if rounds >= mr.max_collapse_rounds:
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
                p.template("collapse"), records=sep.join(parts), **question_values(query)
            )  # == collapse_prompt() unless truncated
            requests.append(as_request(llm, prompt, collapse_params))
        outs = mr.call(llm, requests, stats)
        collapsed = [
            parse_reply(out, p, source, sorted({s for i in g for s in records[i].sources}))
            for g, out in zip(groups, outs, strict=True)
        ]
        ask_confidences(mr, llm, p, "collapse", source, requests, outs, collapsed, stats, trace)
        merged = []
        for g, out, rec in zip(groups, outs, collapsed, strict=True):
            inputs = [records[i] for i in g]
            if rec.confidence is None and p.with_confidence:
                rec.confidence = combined_confidence(rec, inputs)
            trace.append(record_event("collapse", rec.sources, rec, out, rounds))
            if not rec.no_information:
                merged.append(rec)
        records = merged


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


def _norm(s: str | None) -> str:
    return " ".join((s or "").lower().split()).strip(" .")


def combined_confidence(rec: Record, inputs: list[Record]) -> float | None:
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


__all__ = ["CollapseError", "collapse", "combined_confidence", "pack_groups"]
