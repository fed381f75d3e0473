"""The audit's fixed vocabulary and its one rule: walk the evidence's path through a strategy,
stop at the first stage that lost it ("first failure wins"), and name the outcome.

A strategy's auditor (one module per strategy kind) reports facts and the first failure on the
path, or none; :func:`decide` turns that and the prediction's correctness into one outcome:

* the evidence is unknown (the benchmark gives none), or the trace cannot tell: ``unknown``;
* the path held and the prediction is correct: ``correct``;
* the path broke but the prediction is correct anyway: ``correct_without_evidence``;
* the path broke and the prediction is wrong: the failure (``evidence_truncated``,
  ``evidence_not_retrieved``, ``not_extracted``, ``filtered_<reason>``, ``lost_in_collapse``,
  ``lost_in_memory``, ``reduce_ignored``);
* the path held to the final answer, which states the gold value, yet it was scored wrong, or
  (single-call strategies) the model had the evidence and answered wrong:
  ``wrong_despite_evidence``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

#: the reasons a MapReduce record is dropped before reduce, each its own ``filtered_<reason>``
FILTER_REASONS = (
    "no_information",
    "confidence_floor",
    "unscored",
    "ungrounded",
    "misquoted",
    "question_echo",
)

#: every outcome, in the order of a prediction's path (funnels list them in this order)
OUTCOMES: tuple[str, ...] = (
    "correct",
    "evidence_truncated",
    "evidence_not_retrieved",
    "not_extracted",
    *(f"filtered_{r}" for r in FILTER_REASONS),
    "lost_in_collapse",
    "lost_in_memory",
    "reduce_ignored",
    "wrong_despite_evidence",
    "correct_without_evidence",
    "unknown",
)

#: the failures an auditor may report (the rest of the vocabulary is decided here)
FAILURES = frozenset(OUTCOMES) - {"correct", "correct_without_evidence", "unknown"}

#: a prediction counts as correct when its score is at least this (binary scores: exactly the
#: right ones; partial-credit scores: more than half right)
CORRECT_AT = 0.5


def decide(failure: str | None, correct: bool, evidence_known: bool = True) -> str:
    """The one outcome of a prediction (see the module docstring)."""
    if not evidence_known or failure == "unknown":
        return "unknown"
    if failure is not None and failure not in FAILURES:
        raise ValueError(f"not an audit failure: {failure!r}")
    if correct:
        return "correct" if failure is None else "correct_without_evidence"
    return failure or "wrong_despite_evidence"


def _norm(text: str) -> str:
    return " ".join(str(text).lower().split())


def states(text: Any, gold: Iterable[str]) -> bool:
    """Whether ``text`` states one of the gold values: it holds the value as a whole token
    run, case and spacing ignored (``12`` is not stated by ``4123``)."""
    if not isinstance(text, str) or not text:
        return False
    hay = _norm(text)
    for g in gold:
        g = _norm(g)
        if g and re.search(rf"(?<![\w]){re.escape(g)}(?![\w])", hay):
            return True
    return False


def record_states(output: dict[str, Any], gold: Iterable[str]) -> bool:
    """Whether a MapReduce record (a map or collapse event's output) states a gold value in
    its answer or extracted information (even when it also says NO INFORMATION: the record is
    then dropped for that, which the audit names)."""
    gold = list(gold)
    return states(output.get("answer"), gold) or states(output.get("extracted_information"), gold)


__all__ = [
    "CORRECT_AT",
    "FAILURES",
    "FILTER_REASONS",
    "OUTCOMES",
    "decide",
    "record_states",
    "states",
]
