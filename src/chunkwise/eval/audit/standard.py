"""Standard decoding: was the evidence inside the prompt after truncation?

Read from the prompt sent when it is known (the run's recording, or a line's ``prompt`` with
``--log-samples``): every evidence span's text must be in it. Otherwise from the trace's
``kept`` spans (the document characters the prompt holds): every evidence span must lie inside
one. Neither known (an official cut of a saved run): ``unknown``.
"""

from __future__ import annotations

from chunkwise.eval.audit.seen import Report, Seen, prompt_text


def audit(seen: Seen) -> Report:
    ev = seen.evidence
    calls = seen.events("generate")
    if seen.prompts:
        prompt = prompt_text(seen.prompts[-1])
        inside = all(t in prompt for t in ev.texts)
        how = "prompt"
    elif calls and calls[-1].get("output", {}).get("kept") is not None:
        kept = calls[-1]["output"]["kept"]
        inside = all(any(a <= s and e <= b for a, b in kept) for s, e in ev.spans or [])
        how = "kept_spans"
    else:
        return {"in_prompt": None}, "unknown"
    facts = {"in_prompt": inside, "checked_by": how}
    return facts, None if inside else "evidence_truncated"


__all__ = ["audit"]
