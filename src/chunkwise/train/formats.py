"""Training records -> tokenized examples whose labels cover the assistant's output only.

Two record formats come in (ARCHITECTURE.md):

* LongAlign: ``{"messages": [{"role", "content"}, ...]}``; every assistant turn is a target.
* Pyramid-Align: ``{id, document, question, intermediate: {map, collapse}, answer, meta}``.

and two modes go out:

* ``standard``: user = the standard strategy's prompt (instruction + document + question),
  assistant = the answer. LongAlign records are used as they are.
* ``mapreduce``: the calls the ``mapreduce`` strategy makes at decoding time, rendered by that
  strategy's own prompt code (:meth:`MapReduce.map_prompt` and friends), so training and decoding
  see the same text: one example per map record (its chunk + the question -> the record in the
  protocol), one per collapse group (its input records -> the collapsed record) and one for the
  reduce (the final records -> the answer). ``mapreduce_format: single`` instead makes one long
  sequence: (document, question) -> every intermediate record, then the answer.

Chunk text for a map record, first that applies: the record's optional ``chunk`` field; the
character span ``meta.mapreduce.chunks[i]`` the synthesis engine stores (both exact); else the
document is re-chunked with :func:`chunkwise.text.chunk_document` using
``meta.mapreduce.chunk_budget`` (or ``meta.chunk_budget``), or the decoding budget rule (window
- map template - map output - 16, capped by the prompt set's ``chunk_tokens``) with
``data.window``. Re-chunking reproduces decoding only with the tokenizer that produced the
records; the first two avoid that.

Chat models get the text through the tokenizer's chat template; the prompt part is tokenized
exactly as :class:`chunkwise.llm.hf.HFLLM` tokenizes a request, and the target part (the
assistant content and the template's end-of-turn) separately, as generation produces it. Base
models get ``BOS + prompt`` then ``target + EOS``.
"""

from __future__ import annotations

import hashlib
import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise.errors import BadInput
from chunkwise.io import read_jsonl
from chunkwise.strategies.base import TASK_FAMILIES, Query, Stats
from chunkwise.strategies.protocol import Record, render_record

log = logging.getLogger(__name__)

IGNORE = -100


# --------------------------------------------------------------------------------------------
# text-level examples


@dataclass
class TextExample:
    """One training sequence as text: a conversation whose assistant turns are the targets.

    For base (plain-prompt) models the conversation is ``[user: prompt, assistant: target]``
    and is encoded as ``BOS + prompt`` then ``target + EOS``.
    """

    id: str
    stage: str  # standard | chat | map | collapse | reduce | single
    messages: list[dict[str, str]]
    where: str = ""


@dataclass
class Example:
    id: str
    stage: str
    input_ids: np.ndarray  # int32
    labels: np.ndarray  # int32, IGNORE outside assistant spans (not shifted)
    truncated: bool = False

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def n_targets(self) -> int:
        """Tokens the loss sees: label positions after the first (a token predicts the next)."""
        return int((self.labels[1:] != IGNORE).sum())


@dataclass
class FormatStats:
    records: int = 0
    examples: int = 0
    tokens: int = 0
    target_tokens: int = 0
    max_tokens: int = 0
    truncated: int = 0
    skipped: Counter = field(default_factory=Counter)
    stages: Counter = field(default_factory=Counter)
    formats: Counter = field(default_factory=Counter)
    rechunked_records: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "examples": self.examples,
            "tokens": self.tokens,
            "target_tokens": self.target_tokens,
            "max_tokens": self.max_tokens,
            "truncated": self.truncated,
            "skipped": dict(self.skipped),
            "stages": dict(self.stages),
            "formats": dict(self.formats),
            "rechunked_records": self.rechunked_records,
        }


# --------------------------------------------------------------------------------------------
# reading


def read_records(files: Sequence[Path], limit: int = 0) -> Iterator[tuple[str, dict]]:
    """``(file:line, record)`` over every file, at most ``limit`` records (0 = all)."""
    n = 0
    for path in files:
        for lineno, rec in read_jsonl(path):
            yield f"{path}:{lineno}", rec
            n += 1
            if limit and n >= limit:
                return


def record_format(rec: dict, where: str, forced: str = "auto") -> str:
    if forced != "auto":
        return forced
    if "messages" in rec:
        return "longalign"
    if "document" in rec and "question" in rec:
        return "pyramid_align"
    raise BadInput(
        f"{where}: record {rec.get('id', '?')!r} is neither LongAlign (messages) nor "
        "Pyramid-Align (document, question, answer); set data.format or fix the file"
    )


def _rid(rec: dict, where: str) -> str:
    rid = rec.get("id")
    return str(rid) if rid is not None else where


# --------------------------------------------------------------------------------------------
# LongAlign


def expand_longalign(rec: dict, where: str) -> list[TextExample]:
    rid = _rid(rec, where)
    msgs = rec.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise BadInput(f"{where}: record {rid!r}: 'messages' must be a non-empty list")
    clean = []
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant"):
            raise BadInput(
                f"{where}: record {rid!r}: messages[{i}] needs a role of system, user or assistant"
            )
        if not isinstance(m.get("content"), str):
            raise BadInput(f"{where}: record {rid!r}: messages[{i}].content must be text")
        clean.append({"role": m["role"], "content": m["content"]})
    if not any(m["role"] == "assistant" and m["content"].strip() for m in clean):
        raise BadInput(f"{where}: record {rid!r} has no non-empty assistant message to learn from")
    return [TextExample(rid, "chat", clean, where)]


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


def _records(items: Any, what: str, rid: str, where: str) -> list[Record]:
    if not isinstance(items, list) or not all(isinstance(d, dict) for d in items):
        raise BadInput(f"{where}: record {rid!r}: {what} must be a list of record objects")
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


# --------------------------------------------------------------------------------------------
# tokenizing


class Encoder:
    """Text examples -> (input_ids, labels) with labels on assistant output only."""

    def __init__(self, tokenizer: Any, kind: str):
        if kind == "chat" and not getattr(tokenizer, "chat_template", None):
            raise BadInput(
                "chat prompts need a tokenizer with a chat template; set "
                "model.chat_template (llama3 or a .jinja file) or data.prompts=base"
            )
        self.tok = tokenizer
        self.kind = kind
        self.eos = tokenizer.eos_token_id

    def _ids(self, text: str, special: bool = False) -> list[int]:
        return list(self.tok(text, add_special_tokens=special)["input_ids"]) if text else []

    def pieces(self, ex: TextExample) -> list[tuple[str, bool]]:
        """The example as (text, is_target) pieces, in order."""
        msgs = ex.messages
        if self.kind == "chat":
            out: list[tuple[str, bool]] = []
            done = ""
            for j, m in enumerate(msgs):
                if m["role"] != "assistant":
                    continue
                head = self.tok.apply_chat_template(
                    msgs[:j], tokenize=False, add_generation_prompt=True
                )
                full = self.tok.apply_chat_template(msgs[: j + 1], tokenize=False)
                if not head.startswith(done) or not full.startswith(head):
                    raise BadInput(
                        f"{ex.where}: record {ex.id!r}: the chat template is not prefix-stable (the "
                        "rendering of the first turns changes when a turn is added), so assistant "
                        "spans cannot be labelled; use model.chat_template=llama3 or another template"
                    )
                out += [(head[len(done) :], False), (full[len(head) :], True)]
                done = full
            return out
        out = []
        for j, m in enumerate(msgs):
            if m["role"] == "assistant":
                out.append((m["content"], True))
            else:
                out.append((("\n\n" if j else "") + m["content"], False))
        return out

    def encode(self, ex: TextExample) -> tuple[np.ndarray, np.ndarray]:
        ids: list[int] = []
        labels: list[int] = []
        pieces = self.pieces(ex)
        for k, (text, target) in enumerate(pieces):
            toks = self._ids(text, special=(self.kind == "base" and k == 0))
            if target and self.kind == "base" and (k == len(pieces) - 1) and self.eos is not None:
                toks = [*toks, self.eos]
            ids += toks
            labels += toks if target else [IGNORE] * len(toks)
        return np.asarray(ids, dtype=np.int32), np.asarray(labels, dtype=np.int32)


def fit_length(
    ids: np.ndarray, labels: np.ndarray, max_length: int, policy: str, ex: TextExample
) -> tuple[np.ndarray, np.ndarray, str]:
    """Apply the over-long policy; returns (ids, labels, status: ok|truncated|skip:<why>)."""
    n = len(ids)
    if n <= max_length:
        return ids, labels, "ok"
    if policy == "error":
        raise BadInput(
            f"{ex.where}: record {ex.id!r} ({ex.stage}) takes {n} tokens, over data.max_length="
            f"{max_length}; raise data.max_length, or set data.overlong to truncate or skip"
        )
    if policy == "skip":
        return ids, labels, "skip:overlong"
    # truncate: cut the middle of the longest prompt span (the document), keep the targets
    prompt = labels == IGNORE
    best, start = (0, 0, 0), None
    for i, flag in enumerate([*prompt.tolist(), False]):
        if flag and start is None:
            start = i
        elif not flag and start is not None:
            if i - start > best[0]:
                best = (i - start, start, i)
            start = None
    length, s, e = best
    excess = n - max_length
    keep = length - excess
    if keep < 2:
        return ids, labels, "skip:targets_too_long"
    head = keep // 2
    tail = keep - head
    sel = np.concatenate([np.arange(0, s + head), np.arange(e - tail, n)])
    return ids[sel], labels[sel], "truncated"


# --------------------------------------------------------------------------------------------
# the whole data set


def build_examples(
    data: Any, tokenizer: Any, kind: str, files: Sequence[Path], counter: Any = None
) -> tuple[list[Example], FormatStats]:
    """Every record of ``files`` as tokenized examples, per ``data`` (a DataConfig)."""
    from chunkwise.strategies.mapreduce import MapReduce

    mr = MapReduce(**data.mapreduce)
    enc = Encoder(tokenizer, kind)
    counter = counter or _TokenizerCounter(tokenizer, kind)
    stats = FormatStats()
    out: list[Example] = []
    for where, rec in read_records(files, data.limit):
        stats.records += 1
        fmt = record_format(rec, where, data.format)
        stats.formats[fmt] += 1
        if fmt == "longalign":
            if data.mode == "mapreduce":
                raise BadInput(
                    f"{where}: record {_rid(rec, where)!r} is a LongAlign record, which has "
                    "no intermediate outputs; data.mode=mapreduce needs Pyramid-Align"
                )
            texts = expand_longalign(rec, where)
        else:
            texts = expand_pyramid(
                rec,
                where,
                mode=data.mode,
                kind=kind,
                mr=mr,
                mapreduce_format=data.mapreduce_format,
                counter=counter,
                window=data.window,
                stats=stats,
            )
        for ex in texts:
            ids, labels = enc.encode(ex)
            ids, labels, status = fit_length(ids, labels, data.max_length, data.overlong, ex)
            if status.startswith("skip:"):
                stats.skipped[status[5:]] += 1
                continue
            item = Example(ex.id, ex.stage, ids, labels, truncated=status == "truncated")
            if item.n_targets == 0:
                stats.skipped["no_targets"] += 1
                continue
            stats.truncated += item.truncated
            stats.examples += 1
            stats.stages[ex.stage] += 1
            stats.tokens += len(item)
            stats.target_tokens += item.n_targets
            stats.max_tokens = max(stats.max_tokens, len(item))
            out.append(item)
    if not out:
        raise BadInput(
            f"no training examples came out of {', '.join(map(str, files))} "
            f"(records: {stats.records}, skipped: {dict(stats.skipped)})"
        )
    if stats.truncated or stats.skipped:
        log.warning(
            "over-long or empty examples: %d truncated, skipped %s (data.overlong=%s, "
            "max_length=%d)",
            stats.truncated,
            dict(stats.skipped),
            data.overlong,
            data.max_length,
        )
    log.info(
        "data: %d records -> %d examples, %d tokens (%d targets), longest %d; stages %s",
        stats.records,
        stats.examples,
        stats.tokens,
        stats.target_tokens,
        stats.max_tokens,
        dict(stats.stages),
    )
    return out, stats


def files_sha256(files: Sequence[Path]) -> str:
    """One hash over the bytes of every data file (and their names), in order."""
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def examples_sha256(examples: Sequence[Example]) -> str:
    """A hash of the tokenized examples (ids and labels), i.e. of what training sees."""
    h = hashlib.sha256()
    for ex in examples:
        h.update(ex.input_ids.tobytes())
        h.update(ex.labels.tobytes())
    return h.hexdigest()


__all__ = [
    "IGNORE",
    "Encoder",
    "Example",
    "FormatStats",
    "TextExample",
    "build_examples",
    "examples_sha256",
    "expand_longalign",
    "expand_pyramid",
    "files_sha256",
    "fit_length",
    "read_records",
    "record_query",
    "reduce_target",
    "standard_prompt",
]
