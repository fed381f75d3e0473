"""What an auditor reads of one prediction: its evidence, its strategy's trace (events as the
prediction line stores them), the prompts sent when known, and the final answer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chunkwise.eval.audit.evidence import Evidence


@dataclass(frozen=True)
class Seen:
    evidence: Evidence
    #: the trace's events as dicts (``stage``, ``inputs``, ``output``, ``round``, ...)
    trace: list[dict[str, Any]]
    #: every prompt sent, in order (the run's recording, or a line's ``prompt``); None: unknown
    prompts: list[Any] | None
    #: the strategy's final answer
    prediction: str

    def events(self, stage: str) -> list[dict[str, Any]]:
        return [e for e in self.trace if e.get("stage") == stage]


def prompt_text(prompt: Any) -> str:
    """A prompt as text: a string, or chat messages' contents joined."""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        return "\n".join(str(m.get("content", "")) for m in prompt if isinstance(m, dict))
    return ""


#: an auditor's report: the facts it found, and the first failure on the path (None: none)
Report = tuple[dict[str, Any], str | None]

__all__ = ["Report", "Seen", "prompt_text"]
