"""The question (chat or base style) and answer prefix of a RULER example, rendered from
its task kind's wording and the example's ``meta``."""

from __future__ import annotations

from typing import Any

from chunkwise.data.ruler.tasks import TASKS
from chunkwise.data.ruler.wording import templates


def render_question(task: str, meta: dict[str, Any], style: str) -> str:
    """The question of ``task`` for an example's ``meta``; style is chat | base."""
    spec = templates()["kinds"][TASKS[task].kind]
    form = meta.get("form", "one")
    return spec[style][form].format(**_fields(meta))


def render_answer_prefix(task: str, meta: dict[str, Any]) -> str:
    spec = templates()["kinds"][TASKS[task].kind]
    return spec["answer_prefix"][meta.get("form", "one")].format(**_fields(meta))


def _fields(meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "query": meta.get("query", ""),
        "kind": meta.get("kind", ""),
        "kind_one": meta.get("kind_one", ""),
        "count": meta.get("count", ""),
    }
