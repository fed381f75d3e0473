"""RAPTOR's clustering pinned by planted structure (real UMAP + Gaussian mixtures).

Each test fails under one change that the older tests let through: dropping the local
clustering stage, forcing the soft-membership threshold to 0.5, or replacing the BIC
component search with a fixed k = 2. One umap warm-up for the module.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("umap")
pytest.importorskip("sklearn")

from chunkwise.strategies import clustering, get_strategy


@pytest.fixture(scope="module", autouse=True)
def warm_umap():
    return clustering.warm_up()


def unit_means(rng: np.random.Generator, k: int, dim: int = 64) -> np.ndarray:
    m = rng.normal(size=(k, dim))
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def planted(means: np.ndarray, per: int, spread: float, seed: int):
    """``per`` points around each mean (Gaussian noise of ``spread`` per coordinate)."""
    rng = np.random.default_rng(seed)
    pts = np.concatenate([m + spread * rng.normal(size=(per, means.shape[1])) for m in means])
    return pts.astype(np.float32), np.repeat(np.arange(len(means)), per)


@pytest.fixture(scope="module")
def five_blobs():
    return planted(unit_means(np.random.default_rng(7), 5), 20, 0.05, 7)


@pytest.fixture(scope="module")
def five_blob_clusters(five_blobs, mixture_calls):
    return mixture_calls.clusters


@pytest.fixture(scope="module")
def mixture_calls(five_blobs):
    """Every mixture fitted by one raptor_clusters run on the five blobs: (keyword
    arguments, component count it ended with), global fit first."""
    calls = []
    real = clustering.fit_mixture

    def spy(points, **kw):
        fit = real(points, **kw)
        calls.append((kw, fit.n_components))
        return fit

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(clustering, "fit_mixture", spy)
        clusters = clustering.raptor_clusters(five_blobs[0], random_state=0)
    return MixtureCalls(calls, clusters)


class MixtureCalls(list):
    """The recorded calls (a list), and the clusters that run returned."""

    def __init__(self, calls, clusters):
        super().__init__(calls)
        self.clusters = clusters


def test_the_global_stage_finds_the_planted_blobs_by_bic(five_blobs, mixture_calls):
    """The global mixture's component count is the BIC argmin: 5 planted blobs, 5 components
    (a fixed k = 2 gives 2)."""
    pts, labels = five_blobs
    (glob_kw, glob_k), *local = mixture_calls
    assert glob_kw.get("n_components") is None and glob_k == 5
    assert len(local) == 5  # one local mixture per global cluster (each > dim + 1 points)
    assert all(kw.get("n_components") is None for kw, _ in local)  # BIC there too
    # the same search on its own, outside raptor_clusters
    reduced = clustering.reduce_dims(pts, n_neighbors=int(math.sqrt(len(pts) - 1)))
    fit = clustering.fit_mixture(reduced)
    assert fit.n_components == 5
    for comp in range(5):
        members = [i for i, lab in enumerate(fit.labels) if comp in lab]
        assert len(set(labels[members])) == 1


def test_no_cluster_mixes_two_planted_blobs(five_blobs, five_blob_clusters):
    """Five blobs: with k = 2 globally and locally there are at most 4 clusters, so one of
    them must mix blobs; the BIC search never does."""
    _, labels = five_blobs
    assert sorted({i for c in five_blob_clusters for i in c}) == list(range(len(labels)))
    for c in five_blob_clusters:
        assert len(set(labels[c])) == 1, c
    assert {int(labels[c[0]]) for c in five_blob_clusters} == set(range(5))


def test_the_local_stage_reclusters_every_large_global_cluster(five_blobs, five_blob_clusters):
    """Each global cluster (a blob of 20 > dim + 1 points) is clustered again by a local
    UMAP + mixture, which splits it further: more clusters than the 5 global ones. Without
    the local stage exactly the 5 blobs come back."""
    _, labels = five_blobs
    assert len(five_blob_clusters) > 5
    per_blob = {b: sum(1 for c in five_blob_clusters if labels[c[0]] == b) for b in range(5)}
    assert sum(n > 1 for n in per_blob.values()) >= 3, per_blob


def test_every_mixture_of_raptors_clustering_uses_the_soft_threshold(mixture_calls):
    """Global and local mixtures keep a point in every component whose posterior is above
    0.1 (RAPTOR's value; the soft labels themselves are pinned in test_trees_clustering)."""
    seen = [kw.get("threshold") for kw, _ in mixture_calls]
    assert len(seen) == 6 and all(t == 0.1 for t in seen), seen


def test_raptor_passes_its_threshold_down(monkeypatch):
    seen = {}
    real = clustering.raptor_clusters

    def spy(emb, **kw):
        seen.update(kw)
        return real(emb, **kw)

    monkeypatch.setattr(clustering, "raptor_clusters", spy)
    from trees_helpers import EMB, Q, scripted, topic_document

    get_strategy("raptor", embedder=EMB, chunk_tokens=20).answer(topic_document(), Q, scripted())
    assert seen["threshold"] == clustering.DEFAULT_THRESHOLD == 0.1
    assert seen["dim"] == clustering.DEFAULT_DIM == 10
