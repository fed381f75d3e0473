"""Chunk orderings: the spanning tree against brute force, and each ordering's defining property."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkwise.errors import BadInput
from chunkwise.strategies.ordering import (
    ORDERINGS,
    apply_ordering,
    bfs_order,
    maximum_spanning_tree,
    order_chunks,
    similarities,
)

# --------------------------------------------------------------------------------------------
# generators


@st.composite
def graphs(draw, min_n=1, max_n=6, ties=False):
    """A symmetric similarity matrix and query similarities. With ``ties`` the weights come
    from a small set, so equal weights are common."""
    n = draw(st.integers(min_n, max_n))
    if ties:
        w = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])
    else:  # multiples of 1/1024: sums are exact, so brute force sees no rounding ties
        w = st.integers(-1024, 1024).map(lambda k: k / 1024)
    S = np.ones((n, n))
    for i in range(n):
        for j in range(i + 1, n):
            S[i, j] = S[j, i] = draw(w)
    q = np.array([draw(w) for _ in range(n)], dtype=np.float64)
    return S, q


def _is_spanning_tree(n: int, edges) -> bool:
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i, j in edges:
        ri, rj = find(i), find(j)
        if ri == rj:
            return False
        parent[ri] = rj
    return len(edges) == n - 1


def brute_force_trees(S: np.ndarray):
    """Every spanning tree of the complete graph with its total weight."""
    n = S.shape[0]
    all_edges = [(i, j) for i in range(n) for j in range(i + 1, n)]
    for subset in itertools.combinations(all_edges, n - 1):
        if _is_spanning_tree(n, subset):
            yield sum(S[i, j] for i, j in subset), frozenset(subset)


# --------------------------------------------------------------------------------------------
# the maximum spanning tree


@settings(max_examples=150, deadline=None)
@given(graphs(min_n=1, max_n=6))
def test_max_spanning_tree_weight_equals_brute_force(g):
    S, _ = g
    n = S.shape[0]
    edges = maximum_spanning_tree(S)
    assert _is_spanning_tree(n, [(i, j) for i, j, _ in edges])
    assert all(i < j and w == S[i, j] for i, j, w in edges)
    if n <= 1:
        assert edges == []
        return
    best = max(w for w, _ in brute_force_trees(S))
    assert sum(w for _, _, w in edges) == pytest.approx(best, abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(graphs(min_n=2, max_n=6))
def test_max_spanning_tree_is_the_unique_one_when_weights_are_distinct(g):
    S, _ = g
    n = S.shape[0]
    upper = [S[i, j] for i in range(n) for j in range(i + 1, n)]
    if len(set(upper)) != len(upper):
        return  # ties: several maximum trees; the weight test covers them
    trees = sorted(brute_force_trees(S), key=lambda t: -t[0])
    assert frozenset((i, j) for i, j, _ in maximum_spanning_tree(S)) == trees[0][1]


@settings(max_examples=100, deadline=None)
@given(graphs(min_n=2, max_n=6, ties=True))
def test_max_spanning_tree_with_ties_is_maximal_and_deterministic(g):
    S, _ = g
    edges = maximum_spanning_tree(S)
    best = max(w for w, _ in brute_force_trees(S))
    assert sum(w for _, _, w in edges) == pytest.approx(best)
    assert maximum_spanning_tree(S.copy()) == edges


def test_max_spanning_tree_matches_scipy_on_a_larger_graph():
    from scipy.sparse.csgraph import minimum_spanning_tree

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 8))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    S = X @ X.T
    ours = sum(w for _, _, w in maximum_spanning_tree(S))
    W = -(S + 3.0)  # scipy drops zero entries: shift every weight strictly negative
    np.fill_diagonal(W, 0.0)
    theirs = -minimum_spanning_tree(W).sum() - 3.0 * 39
    assert ours == pytest.approx(theirs, abs=1e-9)


# --------------------------------------------------------------------------------------------
# chowliu: a breadth-first order of that tree from the query-most-similar chunk


def check_bfs(order, edges, root):
    """Independent check that ``order`` is the BFS of the tree from ``root`` with children
    queued by descending weight, ties by index."""
    n = len(order)
    assert sorted(order) == list(range(n))
    assert order[0] == root
    adj = {i: {} for i in range(n)}
    for i, j, w in edges:
        adj[i][j] = adj[j][i] = w
    pos = {v: k for k, v in enumerate(order)}
    # parent of each node = its neighbour that comes first in the order; depth from it
    depth = {root: 0}
    parent = {}
    for v in order[1:]:
        earlier = [u for u in adj[v] if pos[u] < pos[v]]
        assert len(earlier) == 1, "in a BFS of a tree exactly one neighbour precedes a node"
        parent[v] = earlier[0]
        depth[v] = depth[earlier[0]] + 1
    depths = [depth[v] for v in order]
    assert depths == sorted(depths), "BFS visits level by level"
    for a, b in itertools.pairwise(order[1:]):
        pa, pb = parent[a], parent[b]
        if pa == pb:  # siblings: descending edge weight, then index
            assert (-adj[pa][a], a) < (-adj[pb][b], b)
        elif depth[a] == depth[b]:  # cousins: in the order of their parents
            assert pos[pa] < pos[pb]


@settings(max_examples=150, deadline=None)
@given(graphs(min_n=1, max_n=7))
def test_chowliu_is_bfs_of_the_max_tree_from_the_query_root(g):
    S, q = g
    out = apply_ordering("chowliu", S, q)
    assert out.root == int(np.argmax(q))
    assert q[out.root] == q.max() and all(q[i] < q.max() for i in range(out.root))
    assert out.edges == maximum_spanning_tree(S)
    check_bfs(out.order, out.edges, out.root)


@settings(max_examples=100, deadline=None)
@given(graphs(min_n=2, max_n=7, ties=True))
def test_chowliu_with_ties(g):
    S, q = g
    out = apply_ordering("chowliu", S, q)
    check_bfs(out.order, out.edges, out.root)


def test_bfs_children_by_weight_then_index():
    # star around 0: children weights 0.5 (1), 0.9 (2), 0.5 (3), 0.7 (4)
    edges = [(0, 1, 0.5), (0, 2, 0.9), (0, 3, 0.5), (0, 4, 0.7), (2, 5, 0.1)]
    assert bfs_order(6, edges, 0) == [0, 2, 4, 1, 3, 5]
    assert bfs_order(6, edges, 2) == [2, 0, 5, 4, 1, 3]


# --------------------------------------------------------------------------------------------
# dense, dfs, default


@settings(max_examples=150, deadline=None)
@given(graphs(min_n=1, max_n=8, ties=True))
def test_dense_is_descending_query_similarity_ties_by_index(g):
    S, q = g
    order = apply_ordering("dense", S, q).order
    assert sorted(order) == list(range(len(q)))
    keys = [(-q[i], i) for i in order]
    assert keys == sorted(keys)


@settings(max_examples=150, deadline=None)
@given(graphs(min_n=1, max_n=8, ties=True))
def test_dfs_greedy_chain_from_the_root(g):
    S, q = g
    out = apply_ordering("dfs", S, q)
    order = out.order
    assert sorted(order) == list(range(len(q)))
    assert order[0] == out.root == int(np.argmax(q))
    for k in range(1, len(order)):
        cur, nxt = order[k - 1], order[k]
        rest = order[k:]
        best = max(S[cur, j] for j in rest)
        assert S[cur, nxt] == best
        assert nxt == min(j for j in rest if S[cur, j] == best)
    assert [(a, b) for a, b, _ in out.edges] == list(itertools.pairwise(order))


@settings(max_examples=50, deadline=None)
@given(graphs(min_n=0, max_n=6))
def test_default_is_document_order_and_all_are_permutations(g):
    S, q = g
    n = len(q)
    assert apply_ordering("default", S, q).order == list(range(n))
    for name in ORDERINGS:
        assert sorted(apply_ordering(name, S, q).order) == list(range(n))


def test_dfs_and_chowliu_differ_where_a_greedy_step_goes_astray():
    # root 0; 0-1 strong; 1-2 strong; 0-3 moderate. BFS visits both of the root's children
    # before the grandchild; the greedy chain runs down 0 -> 1 -> 2 first.
    S = np.array(
        [
            [1.0, 0.9, 0.1, 0.6],
            [0.9, 1.0, 0.8, 0.2],
            [0.1, 0.8, 1.0, 0.3],
            [0.6, 0.2, 0.3, 1.0],
        ]
    )
    q = np.array([0.9, 0.1, 0.2, 0.3])
    assert apply_ordering("chowliu", S, q).order == [0, 1, 3, 2]
    assert apply_ordering("dfs", S, q).order == [0, 1, 2, 3]
    assert apply_ordering("dense", S, q).order == [0, 3, 2, 1]


# --------------------------------------------------------------------------------------------
# similarities and the entry point


CHUNKS = [
    "The lighthouse keeper wrote the code in the note about Odile.",
    "Bread, butter and jam were on the table at breakfast.",
    "Note about Odile: the code is 4817.",
    "The football match was cancelled because of the rain.",
]


def test_order_chunks_with_hashing_embedder_and_bm25():
    q = "Which code did the lighthouse keeper write?"
    for kind in ("dense", "bm25"):
        out = order_chunks("chowliu", CHUNKS, q, similarity=kind, embedder="hashing")
        assert out.root == 0
        assert out.order[1] == 2, out.to_dict()  # the note it points to shares "note about Odile"
        S = out.similarity
        assert np.allclose(S, S.T)
        d = out.to_dict()
        assert set(d) >= {"chunks", "root", "order", "edges", "query_similarity", "similarity"}
        assert d["chunks"] == 4 and len(d["edges"]) == 3


def test_default_needs_no_embedder():
    out = order_chunks("default", CHUNKS, "q", embedder="no-such-embedder")
    assert out.order == [0, 1, 2, 3] and out.root is None


def test_unknown_method_and_similarity():
    with pytest.raises(BadInput, match="unknown ordering"):
        order_chunks("random", CHUNKS, "q")
    with pytest.raises(BadInput, match="unknown similarity"):
        similarities(CHUNKS, "q", "sparse")
