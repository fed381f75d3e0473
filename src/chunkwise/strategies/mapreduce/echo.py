"""Does a map finding answer with the question's own words?

A question often quotes what it asks about: InfiniteBench's kv question is ``Key: "<uuid>"``
then ``The value associated with the specified key is:``; an extractive question quotes the
phrase whose next words it wants. A map call over a part that lacks the quoted span has
nothing to answer, yet a model can copy the span from the question into its answer:
``hf:default-mr`` answered the key itself as the value, confidence 5, in 29 of 31 parts of one
official-format kv document (issue #49), and its reduce returned the key. Grounding misses it
where it is off or the question family's findings are not quotes; the confidence floor misses
it because the model is sure.

A finding *echoes the question* when its answer, compared ignoring case, spacing and the quote
marks and punctuation at its edges,

- is a span the question quotes, or nearly is (a long one with a slip at an edge: their longest
  common run covers :data:`NEAR_COVER` of both),
- lies inside one (an answer of at least :data:`MIN_SPAN_CHARS` characters), or
- holds one that is at least half of it (``Key: "<uuid>"``),

and the part holds neither that span nor the answer. A part that holds the span keeps its
finding: a kv part that holds the key gives the value that follows it, and the key is then
part of the text, not an echo.

A quoted span is text between double quotes (straight or curly), guillemets or backticks, or
between single quotes that open and close next to a non-word character (so the apostrophes of
"the author's dogs' bowls" quote nothing), of at least :data:`MIN_SPAN_CHARS` characters.
Shorter quotes ("Paris", "Hodor") are names a right answer may repeat from a part that says
them in other words; a key or a quoted phrase is longer.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

#: quoted spans shorter than this (after normalising) are not checked
MIN_SPAN_CHARS = 10
#: an answer nearly equals a span when their longest common run covers this share of the
#: longer of the two (both at least :data:`MIN_NEAR_CHARS` long): a stuttered first character
NEAR_COVER = 0.9
MIN_NEAR_CHARS = 12
_FOLD = str.maketrans({"“": '"', "”": '"', "„": '"', "‘": "'", "’": "'"})
_QUOTED = (
    re.compile(r'"([^"\n]{1,400})"'),
    re.compile(r"«([^»\n]{1,400})»"),
    re.compile(r"`([^`\n]{1,400})`"),
    re.compile(r"(?<!\w)'([^'\n]{1,400})'(?!\w)"),
)
_EDGES = " \t\"'`.,;:!?()[]«»"


def _norm(text: str) -> str:
    return " ".join(text.translate(_FOLD).lower().split())


def quoted_spans(question: str) -> list[str]:
    """The spans of at least :data:`MIN_SPAN_CHARS` characters that ``question`` quotes,
    normalised (lower case, single spaces, no edge punctuation), in order, each once."""
    text = question.translate(_FOLD)
    found = (_norm(m.group(1)).strip(_EDGES) for rx in _QUOTED for m in rx.finditer(text))
    return [s for s in dict.fromkeys(found) if len(s) >= MIN_SPAN_CHARS]


def _near(a: str, b: str) -> bool:
    if min(len(a), len(b)) < MIN_NEAR_CHARS:
        return False
    m = SequenceMatcher(None, a, b, autojunk=False).find_longest_match(0, len(a), 0, len(b))
    return m.size >= NEAR_COVER * max(len(a), len(b))


def _echoes(answer: str, span: str) -> bool:
    if answer == span or _near(answer, span):
        return True
    if len(answer) >= MIN_SPAN_CHARS and answer in span:
        return True
    return span in answer and 2 * len(span) >= len(answer)


def echoed_span(question: str, answer: str | None, chunk: str) -> str | None:
    """The span ``question`` quotes that ``answer`` echoes although ``chunk`` holds neither
    it nor the answer (see the module docstring), else None."""
    said = _norm(answer or "").strip(_EDGES)
    if not said:
        return None
    text = _norm(chunk)
    if said in text:
        return None
    return next(
        (s for s in quoted_spans(question) if _echoes(said, s) and s not in text),
        None,
    )


__all__ = ["MIN_SPAN_CHARS", "echoed_span", "quoted_spans"]
