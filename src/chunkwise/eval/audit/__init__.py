"""The evidence audit (``chunkwise eval --audit``): for every prediction, where its gold
evidence was and what the strategy did with it, ending in one outcome from a fixed vocabulary
(:mod:`.outcomes`); per task a funnel (count per outcome, adding up to n).

An auditor per strategy kind, keyed by the strategy's registered name as the strategies
themselves are: :mod:`.standard`, :mod:`.mapreduce`, :mod:`.chain_of_agents`,
:mod:`.retrieval` (retrieval, raptor, dtcrs). Each reads the trace the strategy already
records (and the prompts, where the question is what a prompt held) and never calls a model.
A strategy without an auditor gets ``unknown``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from chunkwise.eval.audit import chain_of_agents, mapreduce, retrieval, standard
from chunkwise.eval.audit.evidence import Evidence, evidence_of
from chunkwise.eval.audit.outcomes import CORRECT_AT, OUTCOMES, decide
from chunkwise.eval.audit.seen import Report, Seen

#: strategy name -> its auditor
AUDITORS: dict[str, Callable[[Seen], Report]] = {
    "standard": standard.audit,
    "mapreduce": mapreduce.audit,
    "chain_of_agents": chain_of_agents.audit,
    "retrieval": retrieval.audit,
    "raptor": retrieval.audit,
    "dtcrs": retrieval.audit,
}


def audit_prediction(
    strategy: str,
    evidence: Evidence,
    trace: list[dict[str, Any]],
    prompts: list[Any] | None,
    prediction: str,
    score: float,
) -> dict[str, Any]:
    """The ``audit`` object of a prediction line: the evidence's spans, the auditor's facts,
    the first failure on the path (``failure``) and the ``outcome``."""
    out: dict[str, Any] = {"evidence": evidence.to_dict()}
    if not evidence.known:
        out.update(failure=None, outcome="unknown")
        return out
    auditor = AUDITORS.get(strategy)
    if auditor is None:
        facts, failure = {"auditor": None}, "unknown"
    else:
        facts, failure = auditor(Seen(evidence, trace, prompts, prediction))
    out.update(facts)
    out["failure"] = failure
    out["outcome"] = decide(failure, score >= CORRECT_AT)
    return out


def outcome_of(audit: dict[str, Any] | None, score: float) -> str:
    """A line's outcome under its current score (a rescore may change correctness)."""
    if not audit or not (audit.get("evidence") or {}).get("spans"):
        return "unknown"
    return decide(audit.get("failure"), score >= CORRECT_AT)


def funnel(outcomes: Iterable[str]) -> dict[str, int]:
    """Count per outcome, every outcome of the vocabulary listed in path order."""
    counts = Counter(outcomes)
    unknown = set(counts) - set(OUTCOMES)
    if unknown:
        raise ValueError(f"not audit outcomes: {sorted(unknown)}")
    return {o: counts.get(o, 0) for o in OUTCOMES}


__all__ = [
    "AUDITORS",
    "OUTCOMES",
    "Evidence",
    "audit_prediction",
    "evidence_of",
    "funnel",
    "outcome_of",
]
