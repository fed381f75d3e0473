"""The answer normalisation and token F1 several benchmarks share (SQuAD's rules).

QASPER's answer F1, QuALITY's reading of a chosen option and LongQA's exact match all compare
text after :func:`normalize_answer`: lower case, punctuation removed, articles (a, an, the)
removed, whitespace collapsed. InfiniteBench's F1 rules tokenise their own way and share
:func:`overlap_f1`.
"""

from __future__ import annotations

import re
import string
from collections import Counter

_PUNCT = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """Lower case, punctuation removed, articles removed, whitespace collapsed (SQuAD)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def token_f1(prediction: str, reference: str) -> float:
    """SQuAD token F1 on normalised text (0 when nothing is shared, empty text included)."""
    return overlap_f1(normalize_answer(prediction).split(), normalize_answer(reference).split())


def overlap_f1(pred: list[str], gold: list[str]) -> float:
    """F1 of the tokens two lists share, counted with multiplicity (0 when none are shared)."""
    same = sum((Counter(pred) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision = same / len(pred)
    recall = same / len(gold)
    return 2 * precision * recall / (precision + recall)


__all__ = ["normalize_answer", "overlap_f1", "token_f1"]
