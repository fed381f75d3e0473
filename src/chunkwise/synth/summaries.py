"""Whether a summary the model wrote is usable: tidying (bullets and scaffold labels off),
the rules that reject one (empty, not words, too short, scaffold, looping, unrelated), and
the repairs that keep its good start (a loop trimmed, an unfinished sentence cut)."""

from __future__ import annotations

import re
from collections import Counter

from chunkwise.text.sentences import sentence_spans

_WORDS = re.compile(r"[^\W\d_]+", re.UNICODE)
_SCAFFOLD = re.compile(
    r"^(?:key sentences|in short|summary|a short summary|question|answer)\b.*?:\s*", re.I
)
#: prompt scaffolding copied into a summary ("... and the value is a key sentence.")
_LEAK = re.compile(r"\bkey sentences?\b|\bthe text above\b|\bsummary of the\b", re.I)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+", re.M)


def clean_summary(text: str) -> str:
    """Tidy a raw summary: bullets and scaffold labels off, lines joined, first letter up."""
    t = _BULLET.sub("", text.strip())
    t = _SCAFFOLD.sub("", t)
    t = " ".join(t.split())
    if t and t[0].islower():
        t = t[0].upper() + t[1:]
    return t


def summary_problem(text: str, children_text: str) -> str | None:
    """Why a (cleaned) summary is unusable, or None. Rules, in order:

    empty; under half of its non-space characters are letters; fewer than 5 words; looping
    (a word 3-gram seen 4+ times, or under 30% distinct words in 20+ words); scaffold (the
    prompt's own labels copied: "key sentence", "the text above"); unrelated (under
    a quarter of its distinct words of 4+ letters appear in the children).
    """
    if not text.strip():
        return "empty"
    letters = sum(ch.isalpha() for ch in text)
    if letters < 0.5 * sum(not ch.isspace() for ch in text):
        return "not_words"
    words = [w.lower() for w in _WORDS.findall(text)]
    if len(words) < 5:
        return "too_short"
    if _LEAK.search(text):
        return "scaffold"
    grams = Counter(zip(words, words[1:], words[2:], strict=False))
    if grams and grams.most_common(1)[0][1] >= 4:
        return "looping"
    if len(words) >= 20 and len(set(words)) < 0.3 * len(words):
        return "looping"
    content = {w for w in words if len(w) >= 4}
    if content:
        source = {w.lower() for w in _WORDS.findall(children_text)}
        if len(content & source) < 0.25 * len(content):
            return "unrelated"
    return None


def trim_loop(text: str) -> str:
    """The sentences of ``text`` before it starts repeating itself: stops at the first sentence
    seen before (by its words) or the first that would make a word 3-gram occur 4 times. A
    summary that loops after a good start keeps the start instead of costing another call."""
    kept: list[str] = []
    seen: set[str] = set()
    grams: Counter[tuple[str, ...]] = Counter()
    for start, end in sentence_spans(text):
        sentence = text[start:end].strip()
        words = [w.lower() for w in _WORDS.findall(sentence)]
        key = " ".join(words)
        if not key:
            continue
        new = Counter(zip(words, words[1:], words[2:], strict=False))
        if key in seen or any(grams[g] + c >= 4 for g, c in new.items()):
            break
        seen.add(key)
        grams.update(new)
        kept.append(sentence)
    return " ".join(kept)


def cut_to_sentence(text: str) -> str:
    """Drop an unfinished last sentence (a completion cut by its token budget)."""
    spans = sentence_spans(text)
    if len(spans) > 1 and text[spans[-1][1] - 1] not in ".!?\"')]":
        return text[: spans[-2][1]]
    return text
