"""RULER's scorers: case-insensitive substring match of the expected strings after RULER's
``postprocess_pred`` (``all``, ``part``; ``official`` is ``all``, see the package docstring).
"""

from __future__ import annotations

import re
from typing import Any

from chunkwise.errors import BadInput

SCORERS = ("official", "all", "part")
_CONTROL = re.compile(r"[\x00-\x1f]")


def postprocess(prediction: Any) -> str:
    """RULER's ``postprocess_pred``: strip, control characters -> newline, strip."""
    text = prediction if isinstance(prediction, str) else ""
    return _CONTROL.sub("\n", text.strip()).strip()


def _references(ground_truth: Any) -> list[str]:
    refs = ground_truth if isinstance(ground_truth, list) else [ground_truth]
    refs = [str(r) for r in refs if r is not None and str(r) != ""]
    if not refs:
        raise BadInput(f"no expected answers in {ground_truth!r}")
    return refs


def string_match_all(prediction: Any, ground_truth: Any) -> float:
    """Fraction of the expected strings found in the prediction (case-insensitive)."""
    pred = postprocess(prediction).lower()
    refs = _references(ground_truth)
    return sum(r.lower() in pred for r in refs) / len(refs)


def string_match_part(prediction: Any, ground_truth: Any) -> float:
    """1.0 when any expected string is found in the prediction (case-insensitive)."""
    pred = postprocess(prediction).lower()
    return float(any(r.lower() in pred for r in _references(ground_truth)))


METRICS = {"all": string_match_all, "part": string_match_part}
#: RULER scores every synthetic task with ``string_match_all`` (its QA tasks, which need
#: downloaded datasets and are not built here, with ``string_match_part``):
#: scripts/eval/synthetic/constants.py
OFFICIAL_METRIC = "all"


def score(task: str, prediction: Any, ground_truth: Any, scorer: str = "official") -> float:
    """One prediction's score in [0, 1]."""
    if scorer not in SCORERS:
        raise BadInput(f"unknown scorer {scorer!r}; valid scorers: {', '.join(SCORERS)}")
    metric = OFFICIAL_METRIC if scorer == "official" else scorer
    return METRICS[metric](prediction, ground_truth)


__all__ = [
    "METRICS",
    "OFFICIAL_METRIC",
    "SCORERS",
    "postprocess",
    "score",
    "string_match_all",
    "string_match_part",
]
