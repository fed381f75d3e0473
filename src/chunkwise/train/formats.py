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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.strategies.protocol import parse_record
from chunkwise.train.encoding import Encoder, fit_length
from chunkwise.train.pyramid_stages import (
    _TokenizerCounter,
    expand_pyramid,
    record_query,
    reduce_target,
    standard_prompt,
)
from chunkwise.train.records import (
    IGNORE,
    Example,
    FormatStats,
    TextExample,
    _rid,
    expand_longalign,
    read_records,
    record_format,
)

log = logging.getLogger("chunkwise.train.formats")

# --------------------------------------------------------------------------------------------
# the whole data set


def says_no_information(ex: TextExample) -> bool:
    """Whether ``ex`` is a map example whose target answer is NO INFORMATION."""
    if ex.stage != "map":
        return False
    target = next((m["content"] for m in reversed(ex.messages) if m["role"] == "assistant"), "")
    return parse_record(target).no_information


def keep_map_example(ex: TextExample, keep: float) -> bool:
    """Whether a map example survives ``data.no_information_keep`` (every other stage does):
    those whose target answer is NO INFORMATION are kept with probability ``keep``, decided by
    a hash of the example id (stable across runs and ranks)."""
    if keep >= 1.0 or not says_no_information(ex):
        return True
    h = int.from_bytes(hashlib.sha256(ex.id.encode()).digest()[:8], "big") / 2**64
    return h < keep


def no_information_keep(data: Any, rec: dict[str, Any]) -> float:
    """The share of ``rec``'s NO-INFORMATION map examples kept: its family's
    (``data.no_information_keep_by_family``, by the record's ``meta.family``), else
    ``data.no_information_keep``."""
    by_family = data.no_information_keep_by_family or {}
    return float(by_family.get(str(_meta(rec).get("family", "")), data.no_information_keep))


def _meta(rec: dict[str, Any]) -> dict[str, Any]:
    return rec["meta"] if isinstance(rec.get("meta"), dict) else {}


def _family(rec: dict[str, Any]) -> str:
    """A record's ``meta.family`` (synthesized data names its task family), else ``-``."""
    return str(_meta(rec).get("family") or "-")


def _mix_kind(ex: TextExample) -> str:
    """What a kept example teaches, as :attr:`FormatStats.mix` names it."""
    if ex.stage == "map":
        return "map_no_information" if says_no_information(ex) else "map_finding"
    return ex.stage  # collapse, reduce; standard mode's one example per record is "standard"


def build_examples(
    data: Any, tokenizer: Any, kind: str, files: Sequence[Path], counter: Any = None
) -> tuple[list[Example], FormatStats]:
    """Every record of ``files`` as tokenized examples, per ``data`` (a DataConfig). Records
    of the files ``data.reduce_only_paths`` names give their reduce example only."""
    from chunkwise.strategies.mapreduce import MapReduce
    from chunkwise.train.recipe import data_files

    reduce_only = {
        str(f.resolve()) for f in data_files(data.reduce_only_paths, "data.reduce_only_paths")
    }

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
        only_reduce = str(where.path.resolve()) in reduce_only
        keep = no_information_keep(data, rec)
        family = _family(rec)
        for ex in texts:
            if only_reduce and ex.stage != "reduce":
                stats.reduce_only_dropped += 1
                continue
            taught = _mix_kind(ex)
            if not keep_map_example(ex, keep):
                stats.skipped["no_information_subsampled"] += 1
                stats.mix[f"{family}/map_no_information_dropped"] += 1
                continue
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
            stats.mix[f"{family}/{taught}"] += 1
            stats.mix[f"{family}/tokens"] += len(item)
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
        "data: %d records -> %d examples, %d tokens (%d targets), longest %d; stages %s; "
        "%d map/collapse examples of reduce-only files left out",
        stats.records,
        stats.examples,
        stats.tokens,
        stats.target_tokens,
        stats.max_tokens,
        dict(stats.stages),
        stats.reduce_only_dropped,
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
    "no_information_keep",
    "read_records",
    "record_query",
    "reduce_target",
    "standard_prompt",
]
