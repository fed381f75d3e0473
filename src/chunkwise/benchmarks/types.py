"""The one example type every benchmark loader returns, and a task's examples with their source.

An example is InfiniteBench's record shape, ``{id, context, input, answer, options}``; other
benchmarks map their files to it. ``answer`` is whatever the benchmark's scorer reads (a string,
a list of references, ``{letter, text, options}``, ...). A loader may add fields of its own
(``doc_id``, ``meta``, ``difficult``, ``source_id``): the runner passes the example on to the
benchmark's ``build_query`` untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict


class Example(TypedDict):
    """One question over one document (checked by :func:`~chunkwise.benchmarks.checks.check_examples`)."""

    id: str | int
    context: str
    input: str
    answer: Any
    options: list[str]
    #: the document the question is about, when one document has several questions
    doc_id: NotRequired[str]
    #: what the benchmark's question templates need (RULER)
    meta: NotRequired[dict[str, Any]]


@dataclass
class TaskData:
    """What a benchmark's ``load`` returns for one task."""

    task: str
    examples: list[Example]
    #: where the examples came from, recorded in results.json: {"source", "revision" | "path" |
    #: "length", ...}
    source: dict[str, Any] = field(default_factory=dict)
    #: examples in the source before ``--limit``
    total: int = 0


__all__ = ["Example", "TaskData"]
