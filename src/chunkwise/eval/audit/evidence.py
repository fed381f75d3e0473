"""What the audit knows of an example's evidence, small enough to keep for every example of a
run: the spans (:mod:`chunkwise.benchmarks.evidence`), their text, the gold values, and the
subset of spans that state a gold value (where an auditor looks for the value)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chunkwise.benchmarks.evidence import Span, answer_strings, overlaps, texts
from chunkwise.eval.audit.outcomes import states


@dataclass(frozen=True)
class Evidence:
    """One example's gold evidence as the auditors read it."""

    #: character spans in the document; None: unknown; []: the document holds none
    spans: list[Span] | None
    #: the spans' text
    texts: list[str]
    #: the gold value(s)
    gold: list[str]

    @property
    def known(self) -> bool:
        return bool(self.spans)

    @property
    def value_spans(self) -> list[Span]:
        """The spans that state a gold value (a needle, a kv pair, the chain's last fact); all
        spans when none does (every span then counts as holding the evidence)."""
        spans = self.spans or []
        valued = [s for s, t in zip(spans, self.texts, strict=True) if states(t, self.gold)]
        return valued or list(spans)

    def held_by(self, start: int, end: int) -> bool:
        """Whether the text ``[start, end)`` holds part of a value-bearing span."""
        return any(overlaps(s, start, end) for s in self.value_spans)

    def to_dict(self) -> dict[str, Any]:
        return {"spans": None if self.spans is None else [list(s) for s in self.spans]}


def evidence_of(bench: Any, task: str, example: dict[str, Any]) -> Evidence:
    """An example's evidence through its benchmark's hook."""
    spans = bench.evidence(task, example)
    context = example.get("context", "")
    found = texts(context, spans) if spans else []
    return Evidence(spans, found, answer_strings(example.get("answer")))


__all__ = ["Evidence", "evidence_of"]
