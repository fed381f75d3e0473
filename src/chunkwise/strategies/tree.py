"""What retrieval, RAPTOR and DTCRS share, re-exported from :mod:`chunkwise.strategies.trees`
(one module per job: leaves, nodes, cache, select, calls, summaries, answering, options).

This module keeps the old import path working: ``from chunkwise.strategies.tree import
Tree, TreeCache, collapsed_select, ...``.
"""

from __future__ import annotations

from chunkwise.strategies.base import check_option
from chunkwise.strategies.trees.answering import (
    answer_from_context,
    answer_params,
    context_budget,
)
from chunkwise.strategies.trees.cache import LRU, TreeCache
from chunkwise.strategies.trees.calls import CALL_KINDS, Prompts, TreeRun, load_prompts, timed
from chunkwise.strategies.trees.leaves import document_key, leaf_tree, sentence_chunks, squash
from chunkwise.strategies.trees.nodes import TREE_FORMAT, Node, Tree
from chunkwise.strategies.trees.options import EmbeddingStrategy
from chunkwise.strategies.trees.select import (
    CONTEXT_ORDERS,
    SEPARATOR_TOKENS,
    Context,
    build_context,
    collapsed_select,
    query_text,
    select_nodes,
    traverse_select,
)
from chunkwise.strategies.trees.summaries import (
    cluster_text,
    summarize_clusters,
    summary_input_budget,
)

__all__ = [
    "CALL_KINDS",
    "CONTEXT_ORDERS",
    "LRU",
    "SEPARATOR_TOKENS",
    "TREE_FORMAT",
    "Context",
    "EmbeddingStrategy",
    "Node",
    "Prompts",
    "Tree",
    "TreeCache",
    "TreeRun",
    "answer_from_context",
    "answer_params",
    "build_context",
    "check_option",
    "cluster_text",
    "collapsed_select",
    "context_budget",
    "document_key",
    "leaf_tree",
    "load_prompts",
    "query_text",
    "select_nodes",
    "sentence_chunks",
    "squash",
    "summarize_clusters",
    "summary_input_budget",
    "timed",
    "traverse_select",
]
