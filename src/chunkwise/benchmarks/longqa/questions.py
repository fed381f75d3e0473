"""LongQA's questions (also NarrativeQA's and Pyramid-Align's): the example's question as it
stands, with a short answer budget, and its options for ``en_mc``.
"""

from __future__ import annotations

from typing import Any

from chunkwise.benchmarks.queries import check_kind
from chunkwise.errors import BadInput

PROMPT_VERSION = "longqa-1"
QA_ANSWER_TOKENS = 64
MC_ANSWER_TOKENS = 16


def build_query(task: str, example: dict[str, Any], kind: str = "chat", window: int | None = None):
    from chunkwise.strategies import Query

    check_kind(kind)
    question = (example.get("input") or "").strip()
    if not question:
        raise BadInput(f"{task} id {example.get('id')!r}: the question is empty")
    if task == "en_mc":
        return Query(
            question,
            task="multiple_choice",
            options=tuple(example.get("options") or ()),
            max_answer_tokens=MC_ANSWER_TOKENS,
        )
    return Query(question, task="qa", max_answer_tokens=QA_ANSWER_TOKENS)


__all__ = ["MC_ANSWER_TOKENS", "PROMPT_VERSION", "QA_ANSWER_TOKENS", "build_query"]
