"""Pyramid-Align records as training text: the standard prompt, or the map / collapse / reduce
calls the mapreduce strategy makes (see chunkwise.train.formats for the rules)."""

from __future__ import annotations

import logging
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.strategies.base import TASK_FAMILIES, Query, Stats
from chunkwise.strategies.protocol import Record, render_record
from chunkwise.train.records import FormatStats, TextExample, _rid

log = logging.getLogger("chunkwise.train.formats")

# --------------------------------------------------------------------------------------------
# Pyramid-Align


def record_query(rec: dict, where: str) -> Query:
    rid = _rid(rec, where)
    q = rec.get("question")
    if not isinstance(q, str) or not q.strip():
        raise BadInput(f"{where}: record {rid!r} has no question")
    meta = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
    task = rec.get("task") or meta.get("task") or "qa"
    if task not in TASK_FAMILIES:
        raise BadInput(f"{where}: record {rid!r}: unknown task family {task!r}")
    return Query(
        q,
        task=task,
        options=tuple(rec.get("options") or ()),
        answer_prefix=rec.get("answer_prefix") or "",
    )


def _answer(rec: dict, where: str) -> str:
    a = rec.get("answer")
    if not isinstance(a, str) or not a.strip():
        raise BadInput(f"{where}: record {_rid(rec, where)!r} has no answer")
    return a.strip()


def standard_prompt(kind: str, query: Query, document: str) -> str:
    """The prompt the ``standard`` strategy sends (before any truncation of the document)."""
    from chunkwise.prompts import prompt_set

    t = prompt_set("standard", kind, query.task)
    return (
        t["prompt"]
        .format(
            document=document,
            question=query.render(),
            answer_prefix=query.answer_prefix or "Answer:",
        )
        .strip()
    )


def _pair(rid: str, stage: str, prompt: str, target: str, where: str) -> TextExample:
    return TextExample(
        rid,
        stage,
        [{"role": "user", "content": prompt}, {"role": "assistant", "content": target}],
        where,
    )


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: the type each field of an intermediate record must have, and how to say it
_RECORD_FIELDS: dict[str, tuple[Any, str]] = {
    "extracted_information": (lambda v: isinstance(v, str), "text"),
    "rationale": (lambda v: isinstance(v, str), "text"),
    "raw": (lambda v: isinstance(v, str), "text"),
    "answer": (lambda v: v is None or isinstance(v, str), "text or null"),
    "confidence": (lambda v: v is None or _is_number(v), "a number or null"),
    "no_information": (lambda v: isinstance(v, bool), "true or false"),
    "truncated": (lambda v: isinstance(v, bool), "true or false"),
    "sources": (
        lambda v: isinstance(v, list) and all(type(i) is int for i in v),
        "a list of chunk numbers",
    ),
}


def _records(items: Any, what: str, rid: str, where: str) -> list[Record]:
    if not isinstance(items, list) or not all(isinstance(d, dict) for d in items):
        raise BadInput(f"{where}: record {rid!r}: {what} must be a list of record objects")
    for i, d in enumerate(items):
        for key, (ok, want) in _RECORD_FIELDS.items():
            if key in d and not ok(d[key]):
                raise BadInput(f"{where}: record {rid!r}: {what}[{i}].{key} must be {want}")
    return [Record.from_dict(d) for d in items]


def _inputs_of(out: Record, candidates: list[Record]) -> list[Record]:
    """The records a collapse output was made from: the candidates its sources cover."""
    cover = set(out.sources)
    return [r for r in candidates if r.sources and set(r.sources) <= cover]


def reduce_target(mr: Any, kind: str, answer: str, rationale: str = "") -> str:
    """The final answer as the reduce stage writes it."""
    if kind == "base":
        return " " + answer
    if mr.protocol == "plain":
        return answer
    return f"Rationale: {rationale}\nAnswer: {answer}" if rationale else f"Answer: {answer}"


class _TokenizerCounter:
    """What re-chunking needs from the training tokenizer, measured as decoding measures it."""

    def __init__(self, tokenizer: Any, kind: str):
        from chunkwise.text import HFTokenCounter

        self._c = HFTokenCounter(tokenizer)
        self.tokenizer = tokenizer
        self.kind = kind

    def count_tokens(self, text: str) -> int:
        return self._c.count_tokens(text)

    def count_tokens_batch(self, texts: list[str]) -> list[int]:
        return self._c.count_tokens_batch(texts)

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        return self._c.token_offsets(text)

    def prompt_tokens(self, prompt: Any) -> int:
        if isinstance(prompt, list):
            text = self.tokenizer.apply_chat_template(
                prompt, tokenize=False, add_generation_prompt=True
            )
            return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])
        return len(self.tokenizer(prompt, add_special_tokens=True)["input_ids"])


def _chunk_texts(
    rec: dict,
    maps: list[dict],
    mr: Any,
    p: Any,
    query: Query,
    kind: str,
    counter: Any,
    window: int,
    where: str,
    stats: FormatStats | None,
) -> list[str]:
    rid = _rid(rec, where)
    if all(isinstance(d.get("chunk"), str) for d in maps):
        return [d["chunk"] for d in maps]
    from chunkwise.text import chunk_budget, chunk_document

    doc = rec["document"]
    meta = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
    mr_meta = meta.get("mapreduce") if isinstance(meta.get("mapreduce"), dict) else {}
    spans = mr_meta.get("chunks")
    if isinstance(spans, list) and spans:
        return [_span_text(doc, spans, d, i, rid, where) for i, d in enumerate(maps)]
    budget = mr_meta.get("chunk_budget", meta.get("chunk_budget"))
    if not isinstance(budget, int) or budget < 1:
        template = mr.map_prompt(p, "", query)
        wrapped = [{"role": "user", "content": template}] if kind == "chat" else template
        budget = chunk_budget(
            window, counter.prompt_tokens(wrapped), 0, int(p.templates["map_max_new_tokens"])
        )
        cap = mr.chunk_tokens or int(p.templates.get("chunk_tokens", 0))
        if cap:
            budget = min(budget, cap)
    chunks = chunk_document(doc, counter, budget)
    if stats is not None:
        stats.rechunked_records += 1
    out = []
    for i, d in enumerate(maps):
        if isinstance(d.get("chunk"), str):
            out.append(d["chunk"])
            continue
        src = d.get("sources") or []
        if len(src) != 1 or not isinstance(src[0], int) or not 0 <= src[0] < len(chunks):
            raise BadInput(
                f"{where}: record {rid!r}: intermediate.map[{i}] cites chunk {src} but re-chunking "
                f"the document with a {budget}-token budget gives {len(chunks)} chunks; store each "
                "map record's chunk text in a 'chunk' field, or set meta.chunk_budget / data.window "
                "to the synthesis settings"
            )
        out.append(chunks[src[0]].text)
    return out


def _span_text(doc: str, spans: list, d: dict, i: int, rid: str, where: str) -> str:
    """A map record's chunk from ``meta.mapreduce.chunks`` (character spans), or its ``chunk``."""
    if isinstance(d.get("chunk"), str):
        return d["chunk"]
    src = d.get("sources") or []
    ok = len(src) == 1 and isinstance(src[0], int) and 0 <= src[0] < len(spans)
    span = spans[src[0]] if ok else None
    if not (isinstance(span, list) and len(span) == 2 and 0 <= span[0] < span[1] <= len(doc)):
        raise BadInput(
            f"{where}: record {rid!r}: intermediate.map[{i}] cites chunk {src}, which "
            f"meta.mapreduce.chunks ({len(spans)} spans) does not give for this document"
        )
    return doc[span[0] : span[1]]


def expand_pyramid(
    rec: dict,
    where: str,
    *,
    mode: str,
    kind: str,
    mr: Any = None,
    mapreduce_format: str = "stages",
    counter: Any = None,
    window: int = 8192,
    stats: FormatStats | None = None,
) -> list[TextExample]:
    """Text examples for one Pyramid-Align record (see the module docstring)."""
    rid = _rid(rec, where)
    doc = rec.get("document")
    if not isinstance(doc, str) or not doc.strip():
        raise BadInput(f"{where}: record {rid!r} has no document")
    query = record_query(rec, where)
    answer = _answer(rec, where)
    if mode == "standard":
        target = (" " + answer) if kind == "base" else answer
        return [_pair(rid, "standard", standard_prompt(kind, query, doc), target, where)]

    inter = rec.get("intermediate")
    if not isinstance(inter, dict) or not inter.get("map"):
        raise BadInput(
            f"{where}: record {rid!r} has no intermediate outputs (intermediate.map is missing or "
            "empty); data.mode=mapreduce trains on the MapReduce stages, so every record needs M. "
            "Regenerate it with the synthesis engine, drop it, or train with data.mode=standard"
        )
    p = mr.prompt_set(kind, query.task)
    map_dicts = inter["map"]
    maps = _records(map_dicts, "intermediate.map", rid, where)
    rounds_raw = inter.get("collapse") or []
    if not isinstance(rounds_raw, list):
        raise BadInput(f"{where}: record {rid!r}: intermediate.collapse must be a list of rounds")
    rounds = [
        _records(r, f"intermediate.collapse[{k}]", rid, where) for k, r in enumerate(rounds_raw)
    ]
    reduce_info = inter.get("reduce") if isinstance(inter.get("reduce"), dict) else {}
    final_target = reduce_target(mr, kind, answer, str(reduce_info.get("rationale") or "").strip())

    # the records each stage saw, as decoding selected them
    kept = mr.confident_records([r for r in maps if not r.no_information], p, Stats())
    final = kept
    for rnd in rounds:
        final = [r for r in rnd if not r.no_information]

    if mapreduce_format == "single":
        user = standard_prompt(kind, query, doc)
        return [_pair(rid, "single", user, _single_target(maps, rounds, final_target), where)]

    chunks = _chunk_texts(rec, map_dicts, mr, p, query, kind, counter, window, where, stats)
    out = []
    for i, (r, chunk) in enumerate(zip(maps, chunks, strict=True)):
        out.append(
            _pair(
                f"{rid}:map{i}",
                "map",
                mr.map_prompt(p, chunk, query),
                mr.record_target(p, r),
                where,
            )
        )
    candidates = kept
    for k, rnd in enumerate(rounds):
        for j, c in enumerate(rnd):
            inputs = _inputs_of(c, candidates)
            if not inputs:
                raise BadInput(
                    f"{where}: record {rid!r}: intermediate.collapse[{k}][{j}] covers "
                    f"chunks {c.sources}, which no record of the previous stage covers"
                )
            out.append(
                _pair(
                    f"{rid}:collapse{k}.{j}",
                    "collapse",
                    mr.collapse_prompt(p, inputs, query),
                    mr.record_target(p, c),
                    where,
                )
            )
        candidates = [r for r in rnd if not r.no_information]
    out.append(
        _pair(f"{rid}:reduce", "reduce", mr.reduce_prompt(p, final, query), final_target, where)
    )
    return out


def _single_target(maps: list[Record], rounds: list[list[Record]], final_target: str) -> str:
    """Intermediate records then the answer, as one assistant turn (mapreduce_format: single)."""
    parts = ["Notes from each part of the document that bears on the question:"]
    for r in maps:
        if not r.no_information:
            parts.append(
                f"[Part {', '.join(str(s + 1) for s in r.sources)}]\n"
                + render_record(r, with_confidence=True)
            )
    for k, rnd in enumerate(rounds):
        parts.append(f"Merged notes, round {k + 1}:")
        for r in rnd:
            if not r.no_information:
                parts.append(
                    f"[Parts {', '.join(str(s + 1) for s in r.sources)}]\n"
                    + render_record(r, with_confidence=True)
                )
    parts.append("Final answer:\n" + final_target.strip())
    return "\n\n".join(parts)
