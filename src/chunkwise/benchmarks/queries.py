"""The plain questions of the QA benchmarks: an example's ``input`` asked as it stands.

QASPER, QuALITY and L-Eval carry the question in ``input`` and the options (multiple choice)
in ``options``; chat and base models get the same wording. :func:`check_kind` is the prompt
kind check every benchmark's ``build_query`` makes.
"""

from __future__ import annotations

from typing import Any

from chunkwise.errors import BadInput

KINDS = ("chat", "base")
#: the version of the plain wording (recorded in results.json)
PROMPT_VERSION = "qa-1"


def check_kind(kind: str) -> None:
    if kind not in KINDS:
        raise BadInput(f"prompt kind must be chat or base, got {kind!r}")


def plain_query(example: dict[str, Any], kind: str, *, choice: bool):
    """The example's ``input`` as a question: multiple choice over its ``options`` when
    ``choice``, else an open question (``qa``)."""
    from chunkwise.strategies import Query

    check_kind(kind)
    question = (example.get("input") or "").strip()
    if choice:
        return Query(question, task="multiple_choice", options=tuple(example["options"]))
    return Query(question, task="qa")


__all__ = ["KINDS", "PROMPT_VERSION", "check_kind", "plain_query"]
