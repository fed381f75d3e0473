"""The order in which sequential readers (Chain-of-Agents workers) see a document's chunks.

A bounded memory is lossy, so what survives to the manager depends on the reading order. Every
ordering is a registered function ``(S, q) -> (order, root, edges)`` over

* ``S`` — the (n, n) chunk–chunk similarity matrix (symmetric; the diagonal is ignored), and
* ``q`` — the (n,) similarity of each chunk to the question,

so the same orderings run on dense cosine similarities or on BM25 scores. Registered:

``default``  document order.
``dense``    descending query similarity (ties: lower chunk index first).
``chowliu``  the Chow–Liu order: a maximum-weight spanning tree over ``S`` (cosine similarity
             standing in for pairwise mutual information), walked breadth-first from the chunk
             most similar to the question; a node's children are visited by descending edge
             weight, ties by chunk index.
``dfs``      a greedy chain over the complete graph: start at the same root, then always go to
             the unvisited chunk most similar to the current one (ties: lower index).

Ties everywhere break towards the lower chunk index, so an ordering is a pure function of
``(S, q)``. :func:`order_chunks` computes the similarities (``dense``: a
:mod:`chunkwise.embed` encoder; ``bm25``: symmetrised, max-scaled BM25) and applies a method.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chunkwise.errors import BadInput

Edge = tuple[int, int, float]
OrderFn = Callable[[np.ndarray, np.ndarray], tuple[list[int], "int | None", list[Edge]]]

SIMILARITIES = ("dense", "bm25")


@dataclass
class Ordering:
    """An ordering and everything it was computed from (what ``chunkwise order`` prints)."""

    method: str
    order: list[int]
    root: int | None
    #: tree edges (chowliu), chain steps (dfs), none for default / dense; (i, j, weight), i < j
    #: for tree edges, (from, to, weight) for chain steps
    edges: list[Edge] = field(default_factory=list)
    query_similarity: np.ndarray = field(default_factory=lambda: np.zeros(0))
    similarity: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    similarity_kind: str = "dense"

    def to_dict(self, digits: int = 4) -> dict[str, Any]:
        return {
            "method": self.method,
            "similarity_kind": self.similarity_kind,
            "chunks": len(self.order),
            "root": self.root,
            "order": list(self.order),
            "edges": [[int(i), int(j), round(float(w), digits)] for i, j, w in self.edges],
            "query_similarity": [round(float(x), digits) for x in self.query_similarity],
            "similarity": [[round(float(x), digits) for x in row] for row in self.similarity],
        }


# --------------------------------------------------------------------------------------------
# graph pieces


def _check(S: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    S = np.asarray(S, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64).reshape(-1)
    if S.ndim != 2 or S.shape[0] != S.shape[1]:
        raise ValueError(f"similarity matrix must be square, got shape {S.shape}")
    if q.shape[0] != S.shape[0]:
        raise ValueError(f"{q.shape[0]} query similarities for {S.shape[0]} chunks")
    return np.nan_to_num(S, nan=0.0), np.nan_to_num(q, nan=0.0)


def query_root(q: np.ndarray) -> int:
    """The chunk most similar to the question (the lowest index among equals)."""
    q = np.asarray(q, dtype=np.float64).reshape(-1)
    if q.size == 0:
        raise ValueError("no chunks")
    return int(np.argmax(q))  # argmax returns the first maximum


def maximum_spanning_tree(S: np.ndarray) -> list[Edge]:
    """Edges ``(i, j, S[i, j])`` with ``i < j`` of a maximum-weight spanning tree of the
    complete graph over ``S`` (Prim's algorithm, O(n²), any real weights, zero included).

    Deterministic: among equal candidate weights the lower-indexed new node joins first, through
    the tree node that first offered that weight. Only the upper triangle's values matter when
    ``S`` is symmetric; pass a symmetric matrix.
    """
    S = np.asarray(S, dtype=np.float64)
    n = S.shape[0]
    if n <= 1:
        return []
    in_tree = np.zeros(n, dtype=bool)
    in_tree[0] = True
    best = S[0].copy()  # best weight connecting each node to the tree
    parent = np.zeros(n, dtype=np.int64)
    edges: list[Edge] = []
    for _ in range(n - 1):
        cand = np.where(in_tree, -np.inf, best)
        v = int(np.argmax(cand))  # first maximum: lowest index among ties
        u = int(parent[v])
        edges.append((min(u, v), max(u, v), float(S[u, v])))
        in_tree[v] = True
        better = (~in_tree) & (S[v] > best)  # strict: an earlier (lower) parent keeps a tie
        best = np.where(better, S[v], best)
        parent = np.where(better, v, parent)
    return sorted(edges)


def bfs_order(n: int, edges: Sequence[Edge], root: int) -> list[int]:
    """Breadth-first order of a tree from ``root``; each node's unvisited neighbours are
    queued by descending edge weight, ties by node index. Nodes the edges do not reach are
    appended in index order (never happens for a spanning tree)."""
    adj: list[list[tuple[float, int]]] = [[] for _ in range(n)]
    for i, j, w in edges:
        adj[i].append((w, j))
        adj[j].append((w, i))
    for a in adj:
        a.sort(key=lambda t: (-t[0], t[1]))
    seen = [False] * n
    order: list[int] = []
    queue = deque([root])
    seen[root] = True
    while queue:
        u = queue.popleft()
        order.append(u)
        for _, v in adj[u]:
            if not seen[v]:
                seen[v] = True
                queue.append(v)
    order.extend(i for i in range(n) if not seen[i])
    return order


# --------------------------------------------------------------------------------------------
# the orderings


def order_default(S: np.ndarray, q: np.ndarray) -> tuple[list[int], int | None, list[Edge]]:
    return list(range(S.shape[0])), None, []


def order_dense(S: np.ndarray, q: np.ndarray) -> tuple[list[int], int | None, list[Edge]]:
    order = [int(i) for i in np.argsort(-q, kind="stable")]
    return order, (order[0] if order else None), []


def order_chowliu(S: np.ndarray, q: np.ndarray) -> tuple[list[int], int | None, list[Edge]]:
    n = S.shape[0]
    if n == 0:
        return [], None, []
    root = query_root(q)
    edges = maximum_spanning_tree(S)
    return bfs_order(n, edges, root), root, edges


def order_dfs(S: np.ndarray, q: np.ndarray) -> tuple[list[int], int | None, list[Edge]]:
    n = S.shape[0]
    if n == 0:
        return [], None, []
    root = query_root(q)
    visited = np.zeros(n, dtype=bool)
    visited[root] = True
    order, steps, cur = [root], [], root
    for _ in range(n - 1):
        row = np.where(visited, -np.inf, S[cur])
        nxt = int(np.argmax(row))
        steps.append((cur, nxt, float(S[cur, nxt])))
        visited[nxt] = True
        order.append(nxt)
        cur = nxt
    return order, root, steps


ORDERINGS: dict[str, OrderFn] = {}


def register_ordering(name: str, fn: OrderFn) -> None:
    ORDERINGS[name] = fn


register_ordering("default", order_default)
register_ordering("dense", order_dense)
register_ordering("chowliu", order_chowliu)
register_ordering("dfs", order_dfs)


def check_method(method: str) -> str:
    if method not in ORDERINGS:
        raise BadInput(f"unknown ordering {method!r}; valid: {', '.join(ORDERINGS)}")
    return method


def apply_ordering(method: str, S: np.ndarray, q: np.ndarray) -> Ordering:
    """Run a registered ordering on precomputed similarities."""
    fn = ORDERINGS[check_method(method)]
    S, q = _check(S, q)
    order, root, edges = fn(S, q)
    if sorted(order) != list(range(S.shape[0])):  # pragma: no cover - a broken ordering
        raise RuntimeError(f"ordering {method!r} did not return a permutation: {order}")
    return Ordering(method, order, root, edges, q, S)


# --------------------------------------------------------------------------------------------
# similarities


def dense_similarities(
    chunks: Sequence[str], question: str, embedder: Any
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine similarities from an encoder with ``encode(texts) -> rows`` (normalized)."""
    from chunkwise.embed import cosine

    vecs = np.asarray(embedder.encode([question, *chunks]), dtype=np.float32)
    sims = cosine(vecs, vecs).astype(np.float64)
    S = sims[1:, 1:].copy()
    np.fill_diagonal(S, 1.0)
    return S, sims[0, 1:].copy()


def bm25_similarities(chunks: Sequence[str], question: str) -> tuple[np.ndarray, np.ndarray]:
    """BM25 over the chunks as the corpus. Chunk–chunk scores are symmetrised
    (``(B + B.T) / 2``, with ``B[i, j]`` = chunk i as a query against chunk j) and, like the
    query scores, divided by their largest off-diagonal value so they lie in [0, 1]."""
    from chunkwise.embed.bm25 import BM25

    n = len(chunks)
    index = BM25(list(chunks))
    B = np.stack([index.scores(c) for c in chunks]) if n else np.zeros((0, 0))
    S = (B + B.T) / 2.0
    off = S[~np.eye(n, dtype=bool)] if n > 1 else np.zeros(0)
    top = float(off.max()) if off.size and off.max() > 0 else 1.0
    S = S / top
    np.fill_diagonal(S, 1.0)
    q = index.scores(question)
    q = q / (float(q.max()) if q.size and q.max() > 0 else 1.0)
    return S, q


def similarities(
    chunks: Sequence[str], question: str, kind: str = "dense", embedder: Any = "minilm"
) -> tuple[np.ndarray, np.ndarray]:
    """(S, q) for ``kind`` dense | bm25. ``embedder``: an encoder object or a
    :func:`chunkwise.embed.get_embedder` name."""
    if kind == "bm25":
        return bm25_similarities(chunks, question)
    if kind != "dense":
        raise BadInput(f"unknown similarity {kind!r}; valid: {', '.join(SIMILARITIES)}")
    if isinstance(embedder, str):
        from chunkwise.embed import get_embedder

        embedder = get_embedder(embedder)
    return dense_similarities(chunks, question, embedder)


def order_chunks(
    method: str,
    chunks: Sequence[str],
    question: str,
    *,
    similarity: str = "dense",
    embedder: Any = "minilm",
) -> Ordering:
    """Order ``chunks`` for ``question`` with a registered method. ``default`` computes no
    similarities (no embedder is loaded)."""
    check_method(method)
    n = len(chunks)
    if method == "default":
        return Ordering(method, list(range(n)), None, [], np.zeros(n), np.zeros((n, n)), "none")
    S, q = similarities(chunks, question, similarity, embedder)
    out = apply_ordering(method, S, q)
    out.similarity_kind = similarity
    return out


__all__ = [
    "ORDERINGS",
    "SIMILARITIES",
    "Ordering",
    "apply_ordering",
    "bfs_order",
    "bm25_similarities",
    "check_method",
    "dense_similarities",
    "maximum_spanning_tree",
    "order_chunks",
    "query_root",
    "register_ordering",
    "similarities",
]
