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

With ``snap_quotes`` on, an answer that nearly copies one value (a whole word: letters, digits,
``-``) of the chunk is first replaced by that value (:func:`snap_answer`). Two slips qualify:

- an *edge slip* in a long answer (``ccf7efe8-...`` for ``cf7efe8-...``: a token-boundary
  stutter seen in ``hf:default-mr``'s kv answers): the run it shares with the chunk covers
  nearly all of it, and the chunk's word around that run is within two characters of its
  length;
- a *count slip* (``002555574`` for ``0025555574``: a run of one repeated digit written one
  too short, 24 of the 25 number_string misses of one ``make default-mr`` seed at 4K): with
  each run of a repeated character written once, the answer equals exactly one word of the
  chunk. The model found the value and lost count inside it.

An answer found in the chunk only inside a longer word (``40588333`` in ``4058833333``) is not
a copy of a value and can snap. Short answers (an access code, a pass key) never snap, nor
does a changed character (``2225733001`` for ``2225733000``): one other digit is another
answer.

A phrase the question itself quotes is a second check, for any question family (the
mapreduce option ``anchor_quotes``): a finding that reproduces a quoted phrase of at least
``MIN_ANCHOR_WORDS`` words ("which four words come right after \"If none of the other
commands\"?") from a chunk that does not hold that phrase has echoed the question and made up
what goes with it. One ``make default-mr`` seed did so in 248 of 396 parts of held-out
extractive QA documents that lack the phrase ("If none of the other commands are visible, the
document will give a"); the first check cannot see it, since a free-form question's findings
need not be quotes. A chunk that begins with the phrase's last words or ends with its first
ones (a chunk boundary inside the phrase) counts as holding it.

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


#: answers shorter than this never take an edge-slip snap
MIN_SNAP_CHARS = 12
#: answers shorter than this never take a count-slip snap
MIN_COUNT_SNAP_CHARS = 6
#: the share of the answer that its run in common with the chunk must cover to be snapped
MIN_SNAP_COVER = 0.9
_WORD = re.compile(r"[\w-]")
_WORDS = re.compile(r"[\w-]+")
_REPEATS = re.compile(r"(.)\1+")


def _copied(value: str, chunk: str) -> bool:
    """Whether ``value`` occurs in ``chunk`` as a whole value, not inside a longer word."""
    return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", chunk) is not None


def _once(text: str) -> str:
    """``text`` with each run of one repeated character written once."""
    return _REPEATS.sub(r"\1", text)


def snap_answer(answer: str | None, chunk: str) -> str | None:
    """The chunk's value that ``answer`` nearly copies (see the module docstring), or None
    when it copies one exactly, is short, or is no edge or count slip of one word of the
    chunk."""
    value = (answer or "").strip(_EDGES)
    if not value or _copied(value, chunk):
        return None
    return _edge_slip(value, chunk) or _count_slip(value, chunk)


def _count_slip(value: str, chunk: str) -> str | None:
    """The one word of ``chunk`` that ``value`` copies with a run miscounted, else None."""
    if len(value) < MIN_COUNT_SNAP_CHARS:
        return None
    key = _once(value)
    found = {w for w in _WORDS.findall(chunk) if w != value and _once(w) == key}
    return found.pop() if len(found) == 1 else None


def _edge_slip(value: str, chunk: str) -> str | None:
    """The word of ``chunk`` that the long ``value`` copies but for one edge, else None."""
    if len(value) < MIN_SNAP_CHARS:
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


#: phrases the question quotes are anchors from this many words: shorter quotes (a key, a
#: name, "the Red Wedding") are names a finding may restate from another wording
MIN_ANCHOR_WORDS = 5
_QUOTED = re.compile(r'"([^"]{1,400})"')


def quoted_phrases(question: str) -> list[str]:
    """The phrases of at least :data:`MIN_ANCHOR_WORDS` words that ``question`` puts in
    double quotes (straight or curly), normalised (lower case, single spaces)."""
    found = (_norm(m.group(1)).strip(_EDGES) for m in _QUOTED.finditer(question.translate(_QUOTES)))
    return [p for p in dict.fromkeys(found) if len(p.split()) >= MIN_ANCHOR_WORDS]


def holds_phrase(chunk: str, phrase: str) -> bool:
    """Whether ``chunk`` holds the normalised ``phrase``, or the piece of it that a chunk
    boundary leaves: the chunk begins with its last words or ends with its first ones (whole
    words, but for the word at the boundary, which a token boundary may have cut)."""
    text = _norm(chunk).strip(_EDGES)
    if phrase in text:
        return True
    words, have = phrase.split(), text.split()
    for k in range(len(words)):  # the chunk begins with words[k:], its first word maybe cut
        tail = words[k:]
        first = have[: len(tail)]
        if len(first) == len(tail) and first[1:] == tail[1:] and tail[0].endswith(first[0]):
            return True
    for k in range(1, len(words) + 1):  # ... or ends with words[:k], its last word maybe cut
        head = words[:k]
        last = have[-k:]
        if len(last) == k and last[:-1] == head[:-1] and head[-1].startswith(last[-1]):
            return True
    return False


def misquotes(question: str, extracted: str, answer: str | None, chunk: str) -> bool:
    """Whether a finding (its extracted information or answer) reproduces a phrase that
    ``question`` quotes (:func:`quoted_phrases`) although ``chunk`` does not hold it."""
    said = (_norm(extracted or ""), _norm(answer or ""))
    return any(
        any(p in s for s in said) and not holds_phrase(chunk, p) for p in quoted_phrases(question)
    )
