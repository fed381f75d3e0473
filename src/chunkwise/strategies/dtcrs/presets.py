"""DTCRS's presets: the reference code's settings (luoguanran/DTCRS) and this project's earlier
ones (``preset=v1``), the options an explicit value overrides."""

from __future__ import annotations

from typing import Any

PRESETS: dict[str, dict[str, Any]] = {
    "reference": {
        "min_leaves": 0,  # 0 = dim + 2: a layer needs more than dim + 1 leaves
        "max_cluster_tokens": 10000,
        "recluster": "guided",
        "subquestions": "lines",
        "min_subquestions": 1,
        "max_subquestions": 0,
        "decompose_retries": 0,
        "max_context_tokens": 3500,
        "top_k": 10,
        "toc_input": "head",
        "toc_input_chars": 125000,
        "toc_input_tokens": 0,
    },
    "v1": {
        "min_leaves": 2,
        "max_cluster_tokens": 3500,
        "recluster": "raptor",
        "subquestions": "numbered",
        "min_subquestions": 2,
        "max_subquestions": 5,
        "decompose_retries": 2,
        "max_context_tokens": 2000,
        "top_k": 0,
        "toc_input": "spread",
        "toc_input_chars": 0,
        "toc_input_tokens": 3000,
    },
}
#: how a cluster over the summarizer's budget is split again
RECLUSTER = ("guided", "raptor")

__all__ = ["PRESETS", "RECLUSTER"]
