"""Retrieval and the summary trees (retrieval, raptor, dtcrs): whether what was retrieved (a
leaf holding the evidence, or a node whose summary states the gold value) reached the answer
call.

Read from the answer call's prompt (the last one sent): the run's recording, or a line's
``prompt`` with ``--log-samples``; without it, ``unknown``.
"""

from __future__ import annotations

from chunkwise.eval.audit.outcomes import states
from chunkwise.eval.audit.seen import Report, Seen, prompt_text


def audit(seen: Seen) -> Report:
    if not seen.prompts:
        return {"retrieved": None}, "unknown"
    context = prompt_text(seen.prompts[-1])
    leaf = all(t in context for t in seen.evidence.texts)
    value = states(context, seen.evidence.gold)
    facts = {"retrieved": leaf or value, "leaf_in_context": leaf, "value_in_context": value}
    return facts, None if leaf or value else "evidence_not_retrieved"


__all__ = ["audit"]
