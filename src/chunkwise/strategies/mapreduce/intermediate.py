"""A MapReduce trace as the intermediate output M of a Pyramid-Align record."""

from __future__ import annotations

from typing import Any

from chunkwise.strategies.base import Answer


def to_intermediate(answer: Answer) -> dict[str, Any]:
    """The Pyramid-Align ``intermediate`` (M): map records, then collapse rounds."""
    out: dict[str, Any] = {"map": [], "collapse": []}
    for e in answer.trace:
        if e.stage == "map":
            out["map"].append(e.output)
        elif e.stage == "collapse":
            while len(out["collapse"]) < e.round:
                out["collapse"].append([])
            out["collapse"][e.round - 1].append(e.output)
    return out


__all__ = ["to_intermediate"]
