"""Clustering and retrieval primitives of the summary trees (UMAP + Gaussian mixtures).

umap-learn compiles its kernels on the first fit in a process (~40 s): the module-scoped
``warm_umap`` fixture pays that once; every later fit in the test process is warm.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("umap")
pytest.importorskip("sklearn")

from chunkwise.strategies import clustering
from chunkwise.strategies.tree import (
    Node,
    Tree,
    collapsed_select,
    sentence_chunks,
    traverse_select,
)
from chunkwise.text import WordPieceCounter


@pytest.fixture(scope="module", autouse=True)
def warm_umap():
    seconds = clustering.warm_up()  # 0.0 when another test module already warmed the process
    assert clustering.is_warm()
    return seconds


def blobs(centers: int, per: int, dim: int = 64, spread: float = 0.05, seed: int = 0):
    """``centers`` well-separated unit-norm Gaussian blobs of ``per`` points each."""
    rng = np.random.default_rng(seed)
    means = rng.normal(size=(centers, dim))
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    pts = np.concatenate([m + spread * rng.normal(size=(per, dim)) for m in means])
    labels = np.repeat(np.arange(centers), per)
    return pts.astype(np.float32), labels, means


def test_bic_recovers_the_number_of_planted_blobs():
    # 2-D, as RAPTOR's search runs (full covariances, 1 .. min(50, N) - 1 components): in
    # more dimensions with few points per blob, degenerate many-component fits win the BIC
    rng = np.random.default_rng(1)
    centers = rng.normal(size=(3, 2)) * 10
    pts = np.concatenate([c + rng.normal(size=(40, 2)) for c in centers])
    assert clustering.best_component_count(pts, max_clusters=12) == 3


def test_raptor_clusters_recover_planted_blobs():
    pts, labels, _ = blobs(3, 25)
    clusters = clustering.raptor_clusters(pts, random_state=0)
    covered = sorted({i for c in clusters for i in c})
    assert covered == list(range(len(pts)))  # every point is somewhere
    for c in clusters:  # and no cluster mixes blobs
        assert len(set(labels[c])) == 1, c
    # every blob is covered (local clustering may split a blob further: RAPTOR's BIC search
    # over full-covariance mixtures favours many small components in 10 dimensions)
    assert {int(labels[c[0]]) for c in clusters} == {0, 1, 2}


def test_soft_membership_follows_the_threshold():
    probs = np.array([[0.85, 0.15, 0.0], [0.5, 0.45, 0.05], [0.05, 0.05, 0.9]])
    assert clustering.soft_labels(probs, 0.1) == [[0, 1], [0, 1], [2]]
    assert clustering.soft_labels(probs, 0.2) == [[0], [0, 1], [2]]
    # on a real fit: labels are exactly the components above the threshold, and points in
    # the overlap of two blobs sit in both
    rng = np.random.default_rng(2)
    a = rng.normal(size=(40, 2))
    b = rng.normal(size=(40, 2)) + np.array([2.5, 0.0])
    pts = np.concatenate([a, b])
    fit = clustering.fit_mixture(pts, threshold=0.1, n_components=2)
    for row, labs in zip(fit.probabilities, fit.labels, strict=True):
        assert labs == [int(c) for c in np.flatnonzero(row > 0.1)]
    assert any(len(x) == 2 for x in fit.labels)
    strict = clustering.fit_mixture(pts, threshold=0.5, n_components=2)
    assert all(len(x) == 1 for x in strict.labels)


@pytest.mark.parametrize("n_questions", [2, 3, 4])
def test_guided_first_layer_has_one_component_per_subquestion(n_questions):
    pts, labels, means = blobs(n_questions, 8, seed=n_questions)
    rng = np.random.default_rng(5)
    questions = (means + 0.02 * rng.normal(size=means.shape)).astype(np.float32)
    layer = clustering.guided_clusters(pts, questions, random_state=0)
    gm = layer.mixture.model
    assert layer.mixture.n_components == n_questions == gm.n_components
    assert layer.reduced_questions.shape[0] == n_questions
    # the means started at the reduced sub-question points, computed by the same UMAP fit
    np.testing.assert_allclose(gm.means_init, layer.reduced_questions)
    assert layer.reduced_chunks.shape[1] == layer.reduced_questions.shape[1]
    for c in layer.clusters:
        assert len(set(labels[c])) == 1
    assert len(layer.clusters) == n_questions


def test_guided_layer_with_fewer_chunks_than_questions_still_has_every_component():
    pts, _, means = blobs(3, 1, seed=3)
    layer = clustering.guided_clusters(pts[:2], means.astype(np.float32), random_state=0)
    assert layer.mixture.n_components == 3


def test_oversized_clusters_are_split_and_nothing_is_lost():
    sizes = [40] * 10
    calls = []

    def recluster(members):
        calls.append(list(members))
        half = len(members) // 2
        return [members[:half], members[half:]]

    out = clustering.split_oversized([list(range(10))], sizes, 100, recluster)
    assert calls  # re-clustering was tried first
    assert all(sum(sizes[i] for i in c) <= 100 for c in out)
    assert sorted(i for c in out for i in c) == list(range(10))
    # a clustering that cannot split falls back to packing in order
    out = clustering.split_oversized([[0, 1, 2, 3]], sizes, 100, lambda m: [m])
    assert out == [[0, 1], [2, 3]]
    # a single member over the budget stays alone
    assert clustering.split_oversized([[0]], [500], 100, lambda m: [m]) == [[0]]


def test_collapsed_retrieval_respects_budget_and_skips_and_continues():
    sims = [0.9, 0.8, 0.7, 0.6, 0.5]
    sizes = [50, 100, 40, 30, 5]
    picked = collapsed_select(sims, sizes, budget=100)
    # node 1 (100 tokens) would overflow after node 0: skipped, and the scan goes on
    assert picked == [0, 2, 4]
    assert sum(sizes[i] for i in picked) <= 100
    assert collapsed_select(sims, sizes, budget=100, top_k=2) == [0, 2]
    assert collapsed_select(sims, sizes, budget=10) == [4]
    assert collapsed_select(sims, sizes, budget=0) == []
    rng = np.random.default_rng(0)
    for _ in range(50):
        s = rng.random(30)
        z = rng.integers(1, 80, 30)
        b = int(rng.integers(0, 600))
        got = collapsed_select(s, z, b)
        assert sum(z[i] for i in got) <= b
        # maximal: every node left out would overflow the budget
        rest = b - sum(z[i] for i in got)
        assert all(z[i] > rest for i in range(30) if i not in got)


def test_tree_traversal_walks_down_from_the_top_layer():
    leaves = [Node(i, f"leaf {i}", 0, 10) for i in range(4)]
    mids = [Node(4, "m0", 1, 10, (0, 1)), Node(5, "m1", 1, 10, (2, 3))]
    root = [Node(6, "root", 2, 10, (4, 5))]
    tree = Tree(leaves + mids + root, np.zeros((7, 2)), [[0, 1, 2, 3], [4, 5], [6]])
    sims = np.array([0.1, 0.9, 0.8, 0.2, 0.3, 0.7, 0.5])
    assert traverse_select(tree, sims, 1, [10] * 7, 100) == [6, 5, 2]
    assert traverse_select(tree, sims, 2, [10] * 7, 100) == [6, 5, 4, 1, 2]
    assert traverse_select(tree, sims, 2, [10] * 7, 25) == [6, 5]


def test_sentence_chunks_keep_whole_sentences_under_budget():
    text = " ".join(f"Sentence number {i} talks about topic {i % 3}." for i in range(40))
    counter = WordPieceCounter()
    chunks = sentence_chunks(text, counter, 30)
    assert all(n <= 30 for _, n in chunks)
    assert all(c.endswith(".") for c, _ in chunks)
    assert " ".join(c for c, _ in chunks) == " ".join(text.split())
    # a hard-wrapped sentence comes back on one line
    wrapped = "The cell had been put\ntogether efficiently. Next one."
    assert sentence_chunks(wrapped, counter, 100)[0][0] == (
        "The cell had been put together efficiently. Next one."
    )
