"""Is a map finding really in its chunk?

A model taught to quote its evidence (``hf:default-mr``: the oracle teacher's extracted
information for a retrieval question is the evidence sentence) can still make a finding up: a
key-value pair whose key is the question's but whose value belongs to another key, or an
access code no sentence of the chunk states. That is checkable without a model. A retrieval
finding is grounded when

- its answer, "a value copied exactly from the text", occurs in the chunk, and
- each sentence (or ``;``-clause) of its extracted information is nearly all one stretch of
  the chunk's text: the longest run they share covers at least ``MIN_COVER`` of it, ignoring
  case, whitespace and surrounding quote marks. A misquoted article ("An access code of the
  orchard is 5158" for "The access ...") passes; a key glued to another key's value does not.

With ``snap_quotes`` on, a long answer that copies a value of the chunk with one slip at its
edge (``ccf7efe8-...`` for ``cf7efe8-...``: a token-boundary stutter seen in
``hf:default-mr``'s kv answers) is first replaced by that value (:func:`snap_answer`): the run
it shares with the chunk must cover nearly all of it, and the chunk's whole word around that
run (letters, digits, ``-``) must be within two characters of its length. Short answers (an
access code, a pass key) are never snapped: one wrong digit there is a different answer.

Prompt-set families declare whether their findings are quotes (``grounding: quote`` in
``prompts/mapreduce/chat.yaml``); where they are not (a count, a chain of reasoning) nothing
is checked.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

#: pieces shorter than this (after normalising) are not checked: "Yes.", "It is."
MIN_PIECE_CHARS = 8
#: the share of a piece that its longest run in common with the chunk must cover
MIN_COVER = 0.8
_SPLIT = re.compile(r"(?<=[.!?;])\s+|\n+")
_EDGES = " \t\"'`.,;:!?()[]"
_QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'"})


def _norm(text: str) -> str:
    return " ".join(text.translate(_QUOTES).lower().split())


def quote_pieces(extracted: str) -> list[str]:
    """The sentences and clauses of ``extracted`` that must each come from the chunk."""
    pieces = (_norm(p).strip(_EDGES) for p in _SPLIT.split(extracted or ""))
    return [p for p in pieces if len(p) >= MIN_PIECE_CHARS]


def cover(piece: str, text: str) -> float:
    """The share of ``piece`` that its longest run in common with ``text`` covers."""
    if not piece:
        return 1.0
    m = SequenceMatcher(None, piece, text, autojunk=False).find_longest_match(
        0, len(piece), 0, len(text)
    )
    return m.size / len(piece)


#: answers shorter than this are never snapped
MIN_SNAP_CHARS = 12
#: the share of the answer that its run in common with the chunk must cover to be snapped
MIN_SNAP_COVER = 0.9
_WORD = re.compile(r"[\w-]")


def snap_answer(answer: str | None, chunk: str) -> str | None:
    """The chunk's value that ``answer`` nearly copies (see the module docstring), or None
    when it copies one exactly, is short, or is not a near copy of one word of the chunk."""
    value = (answer or "").strip(_EDGES)
    if len(value) < MIN_SNAP_CHARS or value in chunk:
        return None
    m = SequenceMatcher(None, value, chunk, autojunk=False).find_longest_match(
        0, len(value), 0, len(chunk)
    )
    if m.size < MIN_SNAP_COVER * len(value):
        return None
    start, end = m.b, m.b + m.size
    while start > 0 and _WORD.match(chunk[start - 1]):
        start -= 1
    while end < len(chunk) and _WORD.match(chunk[end]):
        end += 1
    word = chunk[start:end]
    return word if abs(len(word) - len(value)) <= 2 and word != value else None


def is_grounded(extracted: str, answer: str | None, chunk: str) -> bool:
    """Whether a finding's answer and extracted information come from ``chunk`` (see the
    module docstring). A finding with no answer is not grounded; an empty or very short
    extraction has nothing more to check."""
    text = _norm(chunk)
    value = _norm(answer or "").strip(_EDGES)
    if not value or value not in text:  # no value given is no value copied
        return False
    return all(cover(p, text) >= MIN_COVER for p in quote_pieces(extracted))
