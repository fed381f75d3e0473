"""MapReduce: which chunk(s) held the evidence; did that chunk's map output state it; was the
record dropped (and why); did it survive each collapse round; did the reduce input hold it;
did the final answer use it.

Read from the trace alone: map events carry the chunk's character ``span`` and, when their
record was dropped, ``dropped`` (``ungrounded``, ``misquoted``, ``question_echo``,
``confidence_floor``, ``unscored``); a record saying NO INFORMATION is dropped as ``no_information``; collapse
events carry their round; the reduce input is the last round's records (no collapse: the map
records kept).
"""

from __future__ import annotations

from typing import Any

from chunkwise.eval.audit.outcomes import record_states, states
from chunkwise.eval.audit.seen import Report, Seen


def _drop_reason(output: dict[str, Any]) -> str | None:
    if output.get("no_information"):
        return "no_information"
    return output.get("dropped")


def audit(seen: Seen) -> Report:
    ev, gold = seen.evidence, seen.evidence.gold
    maps = seen.events("map")
    if not maps or any("span" not in m.get("output", {}) for m in maps):
        return {"holders": None}, "unknown"  # a trace from before chunk spans were recorded
    holders = [m for m in maps if ev.held_by(*m["output"]["span"])]
    facts: dict[str, Any] = {"holders": [m["inputs"][0] for m in holders]}
    if not holders:
        return facts, "unknown"  # the chunks did not cover the evidence
    stating = [m for m in holders if record_states(m["output"], gold)]
    facts["map_stated"] = [m["inputs"][0] for m in stating]
    if not stating:
        facts["said_no_information"] = [
            m["inputs"][0] for m in holders if m["output"].get("no_information")
        ]
        # a holder that only said NO INFORMATION did not extract it
        return facts, "not_extracted"
    kept = [m for m in stating if _drop_reason(m["output"]) is None]
    facts["dropped"] = {m["inputs"][0]: _drop_reason(m["output"]) for m in stating if m not in kept}
    if not kept:
        return facts, f"filtered_{_drop_reason(stating[0]['output'])}"
    # collapse rounds: the evidence survives a round when one of its records states the value
    rounds = sorted({e.get("round", 0) for e in seen.events("collapse")})
    survived = []
    for r in rounds:
        merged = [e for e in seen.events("collapse") if e.get("round", 0) == r]
        ok = any(
            record_states(e["output"], gold) and not e["output"].get("no_information")
            for e in merged
        )
        survived.append(ok)
        if not ok:
            facts["collapse_survived"] = survived
            return facts, "lost_in_collapse"
    facts["collapse_survived"] = survived
    facts["reduce_input"] = True  # what the last stage kept is what reduce read
    reduce = seen.events("reduce")
    answer = reduce[-1]["output"].get("answer") if reduce else seen.prediction
    used = states(answer, gold) or states(seen.prediction, gold)
    facts["answer_used"] = used
    return facts, None if used else "reduce_ignored"


__all__ = ["audit"]
