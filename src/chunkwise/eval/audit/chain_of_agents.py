"""Chain-of-Agents: the step whose chunk held the evidence, whether its worker wrote the gold
value into the memory, and whether the memory carried it to the manager.

Read from the trace: worker events carry the chunk's character ``span`` and the memory after
the step; the manager event the memory it read.
"""

from __future__ import annotations

from typing import Any

from chunkwise.eval.audit.outcomes import states
from chunkwise.eval.audit.seen import Report, Seen


def audit(seen: Seen) -> Report:
    ev, gold = seen.evidence, seen.evidence.gold
    workers = seen.events("worker")
    if not workers or any("span" not in w.get("output", {}) for w in workers):
        return {"holder_steps": None}, "unknown"
    steps = [w.get("round", i + 1) for i, w in enumerate(workers)]
    held = [s for s, w in zip(steps, workers, strict=True) if ev.held_by(*w["output"]["span"])]
    facts: dict[str, Any] = {"holder_steps": held}
    if not held:
        return facts, "unknown"
    memory = {s: w["output"].get("memory", "") for s, w in zip(steps, workers, strict=True)}
    wrote = [s for s in held if states(memory[s], gold)]
    facts["extracted_at"] = wrote[0] if wrote else None
    if not wrote:
        return facts, "not_extracted"
    manager = seen.events("manager")
    final = manager[-1]["output"].get("memory", "") if manager else memory[steps[-1]]
    lost = next((s for s in steps if s > wrote[0] and not states(memory[s], gold)), None)
    facts["lost_at"] = lost
    facts["carried_to_end"] = states(final, gold)
    return facts, None if facts["carried_to_end"] else "lost_in_memory"


__all__ = ["audit"]
