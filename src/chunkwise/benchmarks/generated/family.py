"""A generated example asked and scored through its document family: turned back into the
family's :class:`~chunkwise.data.families.Doc`, asked with :meth:`Doc.query` and scored with
the family's own rule (:meth:`Family.score`) against the generator's ground truth.
"""

from __future__ import annotations

from typing import Any

from chunkwise.benchmarks.queries import check_kind
from chunkwise.data.families import Doc, get_family


def _doc(task: str, example_answer: dict[str, Any], question: str = "") -> Doc:
    return Doc(
        id="",
        family=task,
        context="",
        question=question,
        answer=str(example_answer["answer"]),
        task=str(example_answer.get("task") or "retrieval"),
        answer_prefix=str(example_answer.get("answer_prefix") or ""),
        max_answer_tokens=int(example_answer.get("max_answer_tokens") or 0),
    )


def build_query(task: str, example: dict[str, Any], kind: str = "chat", window: int | None = None):
    """The family's own query (question, task kind, answer prefix, answer budget) for either
    prompt kind: the question text already says what to answer."""
    check_kind(kind)
    return _doc(task, example["answer"], example["input"]).query()


def score(task: str, prediction: str, ground_truth: Any, scorer: str, extract: str) -> float:
    return get_family(task).score(_doc(task, ground_truth), prediction)


__all__ = ["build_query", "score"]
