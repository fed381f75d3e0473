"""A task's audited predictions as a funnel, auditing saved lines that lack an audit.

Lines audited during the run carry their ``audit``; a finished run rerun with ``--audit``
audits its saved lines from their ``trace`` (and ``prompt``, saved with ``--log-samples``,
for the auditors that read prompts), with no model call. A line with neither, or a failed
one, counts as ``unknown``. Outcomes are decided again under the current score, so a rescore
with another scorer moves lines between ``correct`` and the failures.
"""

from __future__ import annotations

from typing import Any

from chunkwise.eval.audit import audit_prediction, funnel, outcome_of
from chunkwise.eval.audit.evidence import Evidence


def saved_prompts(prompt: Any) -> list[Any] | None:
    """A line's ``prompt`` field as the list of prompts sent (one prompt is stored bare)."""
    if prompt is None:
        return None
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt and all(isinstance(m, dict) for m in prompt):
        return [prompt]  # one chat prompt
    return list(prompt) if isinstance(prompt, list) else None


def audit_task(
    strategy: str,
    scored: list[tuple[dict[str, Any], str, float]],
    evidence: dict[Any, Evidence],
) -> tuple[dict[str, Any], bool]:
    """(the task's ``{n, funnel}`` block, whether any line gained an audit). ``scored``: the
    task's (line, extracted text, score); ``evidence``: each id's evidence (for saved lines)."""
    changed = False
    outcomes = []
    for rec, _, score in scored:
        if rec.get("audit") is None and not rec.get("error") and "trace" in rec:
            ev = evidence.get(rec["id"])
            if ev is not None:
                rec["audit"] = audit_prediction(
                    strategy,
                    ev,
                    rec["trace"],
                    saved_prompts(rec.get("prompt")),
                    rec.get("prediction", ""),
                    score,
                )
                changed = True
        outcome = "unknown" if rec.get("error") else outcome_of(rec.get("audit"), score)
        audit = rec.get("audit")
        if audit is not None and audit.get("outcome") != outcome:
            audit["outcome"] = outcome
            changed = True
        outcomes.append(outcome)
    return {"n": len(scored), "funnel": funnel(outcomes)}, changed


__all__ = ["audit_task", "saved_prompts"]
