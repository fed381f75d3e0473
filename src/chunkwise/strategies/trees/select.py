"""Retrieval over a tree: collapsed (every node ranked) or traversal (top layer down), and
the retrieved nodes as one context text.

* :func:`collapsed_select` ranks every node by cosine similarity to the query and keeps
  nodes while they fit a token budget; a node that would overflow is *skipped* and the scan
  goes on (the RAPTOR paper's Algorithm 2; its code stops at the first overflow instead).
* :func:`traverse_select` walks from the top layer down, keeping the ``top_k`` most similar
  children of the nodes kept one layer up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from chunkwise.errors import BadInput
from chunkwise.strategies.base import Query
from chunkwise.strategies.trees.leaves import squash
from chunkwise.strategies.trees.nodes import Node, Tree

#: tokens added per node when texts are joined (the separator between paragraphs)
SEPARATOR_TOKENS = 2

CONTEXT_ORDERS = ("relevance", "document")


def collapsed_select(
    similarities: Sequence[float],
    sizes: Sequence[int],
    budget: int,
    top_k: int = 0,
) -> list[int]:
    """Indices of the nodes to read, most similar first, under a token budget.

    Nodes are scanned from the most to the least similar; one that would take the total
    over ``budget`` is skipped and the scan continues, so smaller nodes further down can
    still fill the remaining room. ``top_k`` > 0 also caps the number of nodes kept.
    """
    order = np.argsort(-np.asarray(similarities, dtype=np.float64), kind="stable")
    picked: list[int] = []
    used = 0
    for i in order:
        n = int(sizes[i])
        if used + n > budget:
            continue
        picked.append(int(i))
        used += n
        if top_k and len(picked) >= top_k:
            break
    return picked


def traverse_select(
    tree: Tree, similarities: np.ndarray, top_k: int, sizes: Sequence[int], budget: int
) -> list[int]:
    """RAPTOR's tree traversal: the ``top_k`` most similar nodes of the top layer, then the
    ``top_k`` most similar among their children, down to the leaves; the nodes kept, in that
    order, are then fitted to the budget (skip and continue)."""
    sims = np.asarray(similarities, dtype=np.float64)
    layer = list(tree.layers[-1])
    kept: list[int] = []
    while layer:
        best = sorted(layer, key=lambda i: -sims[i])[:top_k]
        kept.extend(best)
        layer = sorted({c for i in best for c in tree.nodes[i].children})
    out, used = [], 0
    for i in kept:
        if used + sizes[i] <= budget:
            out.append(i)
            used += sizes[i]
    return out


def select_nodes(
    tree: Tree,
    query_vec: np.ndarray,
    similarity: Callable[[np.ndarray, np.ndarray], np.ndarray],
    mode: str,
    budget: int,
    top_k: int,
) -> list[int]:
    """Nodes of ``tree`` to read for the query embedding ``query_vec`` (collapsed or
    traversal; ``top_k`` 0 = budget only / 5 per layer)."""
    if not tree.nodes:
        return []
    sims = similarity(query_vec, tree.embeddings)[0]
    sizes = [n.tokens + SEPARATOR_TOKENS for n in tree.nodes]
    if mode == "collapsed":
        return collapsed_select(sims, sizes, budget, top_k)
    return traverse_select(tree, sims, top_k or 5, sizes, budget)


def query_text(query: Query) -> str:
    """What is embedded for retrieval: the question and, for multiple choice, its options."""
    return " ".join([query.question.strip(), *[o.strip() for o in query.options]])


@dataclass
class Context:
    node_ids: list[int]
    text: str
    tokens: int


def build_context(
    nodes: Sequence[Node], picked: Sequence[int], order: str, separator: str = "\n\n"
) -> Context:
    """The retrieved nodes as one text: in retrieval order (most similar first), or with
    ``order="document"`` leaves in document order after summaries from the top layer down."""
    ids = list(picked)
    if order == "document":
        ids = sorted(ids, key=lambda i: (-nodes[i].layer, i))
    elif order != "relevance":
        raise BadInput(f"context order {order!r}; valid: relevance, document")
    text = separator.join(squash(nodes[i].text) for i in ids)
    return Context(ids, text, sum(nodes[i].tokens for i in ids))
