"""Where an example's gold evidence is: character spans ``[start, end)`` of its document.

The one place spans are made, read and checked. Each benchmark says how its examples get them
through its :attr:`~chunkwise.benchmarks.Benchmark.evidence` hook, in one of three ways:

* **recorded** — a generator that placed the evidence wrote its spans into the example's
  ``evidence`` field when it built the document (the generated families, RULER's needles and
  variable chains): :func:`recorded`;
* **located** — the gold answer is a value the document states verbatim (InfiniteBench's
  passkey, number_string, kv_retrieval, math_find; extractive QA): every occurrence of it as a
  whole token run, :func:`locate`;
* **unknown** — ``None``: the benchmark gives no evidence (summaries, free-form QA, multiple
  choice). Never a guess.

An empty list means the document was built without its evidence (an unanswerable variant).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from chunkwise.errors import BadInput

Span = tuple[int, int]


def recorded(task: str, example: dict[str, Any]) -> list[Span] | None:
    """The spans the generator recorded in ``example["evidence"]`` (None: none recorded)."""
    spans = example.get("evidence")
    if spans is None:
        return None
    return [(int(s), int(e)) for s, e in spans]


def check_spans(value: Any, where: str, length: int) -> list[list[int]]:
    """``value`` (an example's ``evidence`` field as read from a file) as spans inside a
    document of ``length`` characters; a one-line :class:`BadInput` naming ``where`` if not."""
    ok = isinstance(value, list) and all(
        isinstance(p, (list, tuple))
        and len(p) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in p)
        and 0 <= p[0] <= p[1] <= length
        for p in value
    )
    if not ok:
        raise BadInput(
            f"{where}: evidence must be a list of [start, end] character spans inside the "
            f"context ({length} characters)"
        )
    return [[int(p[0]), int(p[1])] for p in value]


def answer_strings(answer: Any) -> list[str]:
    """The gold value(s) of an example's answer as text: a string, a number, a dict's
    ``answer`` field, or a list of those."""
    if isinstance(answer, dict):
        return answer_strings(answer.get("answer"))
    if isinstance(answer, (list, tuple)):
        return [t for a in answer for t in answer_strings(a)]
    text = "" if answer is None else str(answer)
    return [text] if text.strip() else []


def locate(context: str, values: Iterable[str], *, min_chars: int = 1) -> list[Span] | None:
    """Every verbatim occurrence of any of ``values`` in ``context`` as a whole token run
    (``12`` is not found inside ``4123``), in document order; None when none occurs (the
    evidence is then unknown, never guessed). Values shorter than ``min_chars`` are skipped."""
    spans: set[Span] = set()
    for v in values:
        v = v.strip()
        if len(v) < max(min_chars, 1):
            continue
        rx = re.compile(rf"(?<![\w]){re.escape(v)}(?![\w])")
        spans.update(m.span() for m in rx.finditer(context))
    return sorted(spans) or None


def located_answer(task: str, example: dict[str, Any]) -> list[Span] | None:
    """:func:`locate` of the example's gold answer in its context."""
    return locate(example["context"], answer_strings(example.get("answer")))


def located_extractive(task: str, example: dict[str, Any]) -> list[Span] | None:
    """Extractive QA: :func:`locate` of the references marked ``type: extractive`` (QASPER's
    answer spans), where they occur verbatim; None when the example has none."""
    refs = example.get("answer")
    refs = refs if isinstance(refs, list) else [refs]
    spans = [r["answer"] for r in refs if isinstance(r, dict) and r.get("type") == "extractive"]
    return locate(example["context"], spans) if spans else None


def unknown(task: str, example: dict[str, Any]) -> list[Span] | None:
    """No evidence: the benchmark gives none."""
    return None


def texts(context: str, spans: Sequence[Span]) -> list[str]:
    """The evidence as the document has it."""
    return [context[s:e] for s, e in spans]


def overlaps(span: Span, start: int, end: int) -> bool:
    """Whether ``span`` shares a character with ``[start, end)``."""
    return span[0] < end and start < span[1]


__all__ = [
    "Span",
    "answer_strings",
    "check_spans",
    "locate",
    "located_answer",
    "located_extractive",
    "overlaps",
    "recorded",
    "texts",
    "unknown",
]
