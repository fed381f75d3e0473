"""Sentence splitting for English and CJK text, keeping character spans."""

from __future__ import annotations

import re

# An English sentence ends at . ! ? (plus closing quotes/brackets) followed by whitespace;
# CJK sentences end at full-width punctuation with no space needed.
_SENT_END = re.compile(
    r"""(?:[.!?]+["'”’)\]]*(?=\s))|(?:[。！？；]+[”’」』）]*)|(?:\n\s*\n)""",
)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Spans of the sentences of ``text``, trimmed of surrounding whitespace, in order."""
    spans = []
    start = 0
    for m in _SENT_END.finditer(text):
        end = m.end()
        spans.append((start, end))
        start = end
    spans.append((start, len(text)))
    out = []
    for s, e in spans:
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        if e > s:
            out.append((s, e))
    return out


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text`` (English and CJK punctuation), whitespace-trimmed."""
    return [text[s:e] for s, e in sentence_spans(text)]


def sentence_ends(text: str, start: int, end: int) -> list[int]:
    """Character positions in ``(start, end]`` just after a sentence-ending mark."""
    return [m.end() for m in _SENT_END.finditer(text, start, end) if start < m.end() <= end]
