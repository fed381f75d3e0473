"""Training record types and readers: text- and token-level examples, per-run format
statistics, JSONL reading and the LongAlign (messages) format."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise.errors import BadInput
from chunkwise.io import read_jsonl

log = logging.getLogger("chunkwise.train.formats")

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
    #: map and collapse examples of data.reduce_only_paths' records, left out by design
    reduce_only_dropped: int = 0
    #: what the examples teach, per family (a record's ``meta.family``, ``-`` without one):
    #: ``<family>/<kind>`` -> examples, ``<family>/tokens`` -> their tokens. Kinds: a map
    #: example whose target is a finding (``map_finding``) or NO INFORMATION
    #: (``map_no_information``, or ``map_no_information_dropped`` when
    #: ``data.no_information_keep`` left it out); any other example by its stage (collapse,
    #: reduce; standard, chat, single). :func:`chunkwise.train.data_mix.mix_rows` makes the table
    mix: Counter = field(default_factory=Counter)

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
            "reduce_only_dropped": self.reduce_only_dropped,
            "mix": dict(self.mix),
        }


# --------------------------------------------------------------------------------------------
# reading


class Where(str):
    """Where a record is, as ``file:line`` (what error messages quote), with the file as
    ``.path``."""

    path: Path
    line: int

    def __new__(cls, path: Path, line: int) -> Where:
        where = super().__new__(cls, f"{path}:{line}")
        where.path, where.line = Path(path), line
        return where

    def __reduce__(self) -> tuple[type, tuple[Path, int]]:
        return Where, (self.path, self.line)


def read_records(files: Sequence[Path], limit: int = 0) -> Iterator[tuple[Where, dict]]:
    """``(where, record)`` over every file, at most ``limit`` records (0 = all)."""
    n = 0
    for path in files:
        for lineno, rec in read_jsonl(path):
            yield Where(path, lineno), rec
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
