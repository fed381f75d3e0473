"""QuALITY's scoring: accuracy of the chosen option, and the same on the HARD subset
(``difficult == 1``). :func:`extract_choice` reads a letter or an option's text out of free
model output.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from chunkwise.benchmarks.qa_metrics import normalize_answer, token_f1
from chunkwise.errors import BadInput

LETTERS = "ABCD"
# a reply that is only a letter, or starts with "(B)" / "B." / "B:" / "B)"
_LEAD_LETTER = re.compile(r"^\W*(?:([A-D])\W*$|\(([A-D])\)|([A-D])[.:)\]])")
_SAID_LETTER = re.compile(
    r"(?:answer|option|choice)\s*(?:is|:)?\s*:?\s*\(?([A-D])\)?(?![A-Za-z])", re.I
)
_PAREN_LETTER = re.compile(r"\(([A-D])\)")
_BARE_LETTER = re.compile(r"(?<![A-Za-z'])([B-D])(?![A-Za-z'])")


def extract_choice(prediction: str, options: Sequence[str] = ()) -> str | None:
    """The option letter a free-form reply picks, or None.

    In order: a letter leading the reply ("B", "(B) ...", "B."), a letter after "answer is"
    / "option", a letter in parentheses, the option whose text the reply contains (or
    matches with token F1 >= 0.5, the best one), a lone capital B-D ("A" is too often an
    article to count on its own).
    """
    text = prediction.strip()
    if not text:
        return None
    for rx in (_LEAD_LETTER, _SAID_LETTER, _PAREN_LETTER):
        m = rx.search(text)
        if m:
            return next(g for g in m.groups() if g).upper()
    if options:
        norm = normalize_answer(text)
        contained = [
            i for i, o in enumerate(options) if normalize_answer(o) and normalize_answer(o) in norm
        ]
        if len(contained) == 1:
            return LETTERS[contained[0]]
        scores = [token_f1(text, o) for o in options]
        best = max(range(len(scores)), key=scores.__getitem__)
        if scores[best] >= 0.5:
            return LETTERS[best]
    m = _BARE_LETTER.search(text)
    return m.group(1) if m else None


def quality_correct(prediction: str, gold_letter: str, options: Sequence[str] = ()) -> float:
    return float(extract_choice(prediction, options) == gold_letter.strip().upper())


def quality_accuracy(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """``records``: ``{prediction, answer (letter), options?, difficult?}``. Returns accuracy
    and hard-subset accuracy (None when no record says it is hard)."""
    n = correct = n_hard = hard = 0
    for r in records:
        ok = quality_correct(r["prediction"], r["answer"], r.get("options") or ())
        n += 1
        correct += int(ok)
        if r.get("difficult"):
            n_hard += 1
            hard += int(ok)
    return {
        "accuracy": correct / n if n else 0.0,
        "hard_accuracy": hard / n_hard if n_hard else None,
        "n": n,
        "n_hard": n_hard,
    }


def score(
    task: str, prediction: str, ground_truth: Any, scorer: str = "official", extract: str = "none"
) -> float:
    """1.0 when the reply picks the gold option (``ground_truth``: ``{letter, options?}``);
    QuALITY has one metric (``scorer`` is ignored)."""
    if not isinstance(ground_truth, dict) or "letter" not in ground_truth:
        raise BadInput(f"quality: ground truth {ground_truth!r} has no option letter")
    return quality_correct(prediction, ground_truth["letter"], ground_truth.get("options") or ())


__all__ = ["LETTERS", "extract_choice", "quality_accuracy", "quality_correct", "score"]
