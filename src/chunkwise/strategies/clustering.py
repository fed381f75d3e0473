"""Soft clustering of embeddings for summary trees: UMAP reduction + Gaussian mixtures.

Two clusterings, both returning *soft* clusters (a point may sit in several):

* :func:`raptor_clusters` — RAPTOR's two-stage scheme. A global UMAP (cosine, ``dim``
  components, ``sqrt(N - 1)`` neighbours) and a Gaussian mixture whose component count is
  the BIC argmin; then, inside each global cluster with more than ``dim + 1`` members, a
  local UMAP (10 neighbours) and another BIC-chosen mixture. A point joins every component
  whose posterior is above ``threshold`` (0.1).
* :func:`guided_clusters` — DTCRS's first layer. Chunk and sub-question embeddings are
  reduced by **one** UMAP fit over both sets together; the mixture then has exactly one
  component per sub-question, its means initialised at the reduced sub-question points.
  Two schemes, as the DTCRS code's ``cluster_method``: ``global`` (its default: that UMAP
  uses 10 neighbours and the guided mixture is the layer) and ``hierarchical`` (the UMAP
  uses ``sqrt(N - 1)`` neighbours, and every guided cluster of more than ``dim + 1`` chunks
  is split again by a local UMAP + BIC-chosen mixture, as in RAPTOR's local stage).

:func:`split_oversized` re-clusters any cluster whose members exceed the summarizer's token
budget (RAPTOR's recursive re-clustering), falling back to packing the members in order
when clustering cannot split it further.

``umap-learn`` compiles its kernels with numba on the first fit in a process (~40 s on our
machines). :func:`warm_up` pays that once and returns the seconds it took, so builds can
report it apart from their own time.

numba runs those kernels on its ``workqueue`` threading layer here, not on OpenMP
(:data:`NUMBA_LAYER`; a caller's ``NUMBA_THREADING_LAYER`` wins): once numba's OpenMP pool
existed in a process that also held a vLLM engine, MiniLM embeddings in that process ran 10x
slower (120 windows: 5.8 s before the engine started, 69.5 s after, 7.0 s with workqueue; a
2-core EPYC), which made every summary-tree build beside vLLM mostly embedding time.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chunkwise.errors import MissingDependency

log = logging.getLogger(__name__)

#: RAPTOR's settings (code defaults): reduced dimension, soft threshold, BIC search cap, seeds
DEFAULT_DIM = 10
DEFAULT_THRESHOLD = 0.1
MAX_BIC_CLUSTERS = 50
BIC_SEED = 224
GMM_SEED = 0
LOCAL_NEIGHBOURS = 10

#: numba's threading layer for UMAP unless the caller chose one (see the module docstring)
NUMBA_LAYER = "workqueue"

_WARM_LOCK = threading.Lock()
_WARM: dict[str, float] = {}


def _pin_numba_layer() -> None:
    """Make numba use :data:`NUMBA_LAYER` unless ``NUMBA_THREADING_LAYER`` is set (numba reads
    the variable at import; its config is set too in case it was imported already)."""
    if "NUMBA_THREADING_LAYER" in os.environ:
        return
    os.environ["NUMBA_THREADING_LAYER"] = NUMBA_LAYER
    try:
        from numba.core import config
    except ImportError:
        return
    config.THREADING_LAYER = NUMBA_LAYER


def _umap_module() -> Any:
    _pin_numba_layer()
    try:
        import umap
    except ImportError:
        raise MissingDependency(
            "umap-learn (summary-tree clustering)", "pip install 'chunkwise[trees]'"
        ) from None
    return umap


def _mixture_class() -> Any:
    try:
        from sklearn.mixture import GaussianMixture
    except ImportError:
        raise MissingDependency(
            "scikit-learn (summary-tree clustering)", "pip install 'chunkwise[trees]'"
        ) from None
    return GaussianMixture


def warm_up() -> float:
    """Run one tiny UMAP fit so numba compiles now. Returns the seconds spent in *this* call
    (0.0 once the process is warm)."""
    with _WARM_LOCK:
        if "seconds" in _WARM:
            return 0.0
        t0 = time.perf_counter()
        rng = np.random.default_rng(0)
        points = rng.normal(size=(24, 16)).astype(np.float32)
        reduce_dims(points, n_neighbors=5, dim=4, random_state=0)
        _WARM["seconds"] = time.perf_counter() - t0
        log.info("umap warm-up (numba compilation) took %.1f s", _WARM["seconds"])
        return _WARM["seconds"]


def is_warm() -> bool:
    return "seconds" in _WARM


def reduce_dims(
    embeddings: np.ndarray,
    *,
    n_neighbors: int,
    dim: int = DEFAULT_DIM,
    metric: str = "cosine",
    random_state: int | None = 0,
) -> np.ndarray:
    """UMAP to at most ``dim`` components, guarded for small inputs.

    ``n_components`` is capped at ``N - 2`` (UMAP's spectral initialisation needs it) and
    ``n_neighbors`` kept in ``[2, N - 1]``. With fewer than 4 points nothing is reduced: the
    input comes back unchanged.
    """
    x = np.asarray(embeddings, dtype=np.float32)
    n = len(x)
    if n < 4:
        return x
    comps = max(1, min(dim, n - 2))
    neighbours = int(min(max(2, n_neighbors), n - 1))
    umap = _umap_module()
    with warnings.catch_warnings():
        # n_jobs is forced to 1 when random_state is set; say nothing about it every call
        warnings.filterwarnings("ignore", message=".*n_jobs value.*")
        warnings.filterwarnings("ignore", message=".*k >= N.*")
        warnings.filterwarnings("ignore", category=UserWarning, module="umap")
        reducer = umap.UMAP(
            n_neighbors=neighbours,
            n_components=comps,
            metric=metric,
            random_state=random_state,
            init="spectral" if n > comps + 2 else "random",
        )
        return np.asarray(reducer.fit_transform(x), dtype=np.float64)


def best_component_count(
    points: np.ndarray, max_clusters: int = MAX_BIC_CLUSTERS, random_state: int = BIC_SEED
) -> int:
    """The component count in ``1 .. min(max_clusters, N) - 1`` with the lowest BIC (1 when
    there are fewer than 3 points)."""
    n = len(points)
    upper = min(max_clusters, n)
    if upper <= 2:
        return 1
    gmm_cls = _mixture_class()
    best_k, best_bic = 1, math.inf
    for k in range(1, upper):
        gm = gmm_cls(n_components=k, random_state=random_state)
        gm.fit(points)
        bic = gm.bic(points)
        if bic < best_bic:
            best_k, best_bic = k, bic
    return best_k


def soft_labels(probabilities: np.ndarray, threshold: float) -> list[list[int]]:
    """Per point, every component whose posterior is above ``threshold``."""
    return [[int(c) for c in np.flatnonzero(row > threshold)] for row in probabilities]


@dataclass
class MixtureFit:
    """A fitted mixture and the soft labels it gave."""

    model: Any
    probabilities: np.ndarray
    labels: list[list[int]]
    n_components: int


def fit_mixture(
    points: np.ndarray,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    n_components: int | None = None,
    means_init: np.ndarray | None = None,
    random_state: int = GMM_SEED,
    max_clusters: int = MAX_BIC_CLUSTERS,
) -> MixtureFit:
    """A Gaussian mixture over ``points`` (full covariance); the component count is the BIC
    argmin unless given. Soft labels: components with posterior above ``threshold``."""
    points = np.asarray(points, dtype=np.float64)
    n = len(points)
    if n == 0:
        return MixtureFit(None, np.zeros((0, 0)), [], 0)
    if means_init is not None:
        n_components = len(means_init)
    if n_components is None:
        n_components = best_component_count(points, max_clusters)
    if n == 1 or (n_components == 1 and means_init is None):
        probs = np.ones((n, 1))
        return MixtureFit(None, probs, soft_labels(probs, threshold), 1)
    gmm_cls = _mixture_class()
    gm = gmm_cls(
        n_components=n_components,
        random_state=random_state,
        means_init=None if means_init is None else np.asarray(means_init, dtype=np.float64),
    )
    gm.fit(points)
    probs = gm.predict_proba(points)
    return MixtureFit(gm, probs, soft_labels(probs, threshold), n_components)


def _groups(labels: Sequence[Sequence[int]], n_components: int) -> list[list[int]]:
    """Component -> member indices (empty components dropped)."""
    members: list[list[int]] = [[] for _ in range(n_components)]
    for i, comps in enumerate(labels):
        for c in comps:
            members[c].append(i)
    return [m for m in members if m]


def raptor_clusters(
    embeddings: np.ndarray,
    *,
    dim: int = DEFAULT_DIM,
    threshold: float = DEFAULT_THRESHOLD,
    random_state: int | None = 0,
    max_clusters: int = MAX_BIC_CLUSTERS,
) -> list[list[int]]:
    """RAPTOR's global-then-local soft clustering; returns clusters as lists of row indices.

    Every row lands in at least one cluster: a row whose posteriors are all under the
    threshold joins its most probable component.
    """
    x = np.asarray(embeddings, dtype=np.float32)
    n = len(x)
    if n <= dim + 1:
        return [list(range(n))] if n else []
    reduced = reduce_dims(x, n_neighbors=int(math.sqrt(n - 1)), dim=dim, random_state=random_state)
    glob = fit_mixture(reduced, threshold=threshold, max_clusters=max_clusters)
    glob_labels = _at_least_one(glob)
    clusters: list[list[int]] = []
    for members in _groups(glob_labels, glob.n_components):
        clusters.extend(_local_stage(x, members, dim, threshold, random_state, max_clusters))
    return _dedupe(clusters)


def _at_least_one(fit: MixtureFit) -> list[list[int]]:
    out = []
    for row, labels in zip(fit.probabilities, fit.labels, strict=True):
        out.append(labels if labels else [int(np.argmax(row))])
    return out


def _dedupe(clusters: list[list[int]]) -> list[list[int]]:
    seen: set[tuple[int, ...]] = set()
    out = []
    for c in clusters:
        key = tuple(sorted(c))
        if key and key not in seen:
            seen.add(key)
            out.append(sorted(c))
    return out


@dataclass
class GuidedLayer:
    """DTCRS's first layer: the reduced points, the mixture and its clusters."""

    clusters: list[list[int]]
    reduced_chunks: np.ndarray
    reduced_questions: np.ndarray
    mixture: MixtureFit
    #: chunks whose posteriors were all under the threshold (left as plain leaves)
    unassigned: list[int] = field(default_factory=list)


GUIDED_MODES = ("global", "hierarchical")


def guided_clusters(
    chunk_embeddings: np.ndarray,
    question_embeddings: np.ndarray,
    *,
    dim: int = DEFAULT_DIM,
    threshold: float = DEFAULT_THRESHOLD,
    n_neighbors: int | None = None,
    mode: str = "global",
    random_state: int | None = 0,
    max_clusters: int = MAX_BIC_CLUSTERS,
) -> GuidedLayer:
    """One UMAP fit over chunks and sub-questions together, then a mixture with one component
    per sub-question whose means start at the reduced sub-question points.

    ``mode="global"``: the UMAP uses ``n_neighbors`` (10) and the guided clusters are the
    result. ``mode="hierarchical"``: the UMAP uses ``sqrt(N - 1)`` neighbours (N chunks and
    sub-questions) unless ``n_neighbors`` is given, and each guided cluster of more than
    ``dim + 1`` chunks is re-clustered locally (UMAP with 10 neighbours on its own chunk
    embeddings, BIC-chosen mixture, soft labels, every chunk in at least one).

    The mixture is fitted on the chunk points; when there are fewer chunks than
    sub-questions it is fitted on chunks and sub-question points together (a mixture needs
    at least as many points as components). Clusters are lists of chunk indices, one per
    component that received any chunk, in sub-question order.
    """
    if mode not in GUIDED_MODES:
        raise ValueError(f"guided clustering mode {mode!r}; valid: {', '.join(GUIDED_MODES)}")
    chunks = np.asarray(chunk_embeddings, dtype=np.float32)
    questions = np.asarray(question_embeddings, dtype=np.float32)
    nc, nq = len(chunks), len(questions)
    if nq == 0:
        raise ValueError("guided clustering needs at least one sub-question")
    joint = np.concatenate([chunks, questions], axis=0)
    if n_neighbors is None:
        n_neighbors = (
            LOCAL_NEIGHBOURS if mode == "global" else int(math.sqrt(max(1, len(joint) - 1)))
        )
    reduced = reduce_dims(joint, n_neighbors=n_neighbors, dim=dim, random_state=random_state)
    rc, rq = reduced[:nc], reduced[nc:]
    fit_points = rc if nc >= max(nq, 2) else reduced
    fit = fit_mixture(
        fit_points,
        threshold=threshold,
        means_init=rq,
        random_state=0 if random_state is None else int(random_state),
    )
    labels = fit.labels[:nc]
    unassigned = [i for i, lab in enumerate(labels) if not lab]
    clusters = _groups(labels, fit.n_components)
    if mode == "hierarchical":
        clusters = _dedupe(
            [
                part
                for members in clusters
                for part in _local_stage(
                    chunks, members, dim, threshold, random_state, max_clusters
                )
            ]
        )
    return GuidedLayer(clusters, rc, rq, fit, unassigned)


def _local_stage(
    x: np.ndarray,
    members: list[int],
    dim: int,
    threshold: float,
    random_state: int | None,
    max_clusters: int,
) -> list[list[int]]:
    """RAPTOR's local stage on the rows ``members`` of ``x`` (global ids back); a cluster of
    ``dim + 1`` or fewer members is kept whole."""
    if len(members) <= dim + 1:
        return [members]
    sub = reduce_dims(x[members], n_neighbors=LOCAL_NEIGHBOURS, dim=dim, random_state=random_state)
    loc = fit_mixture(sub, threshold=threshold, max_clusters=max_clusters)
    return [[members[i] for i in local] for local in _groups(_at_least_one(loc), loc.n_components)]


def split_oversized(
    clusters: list[list[int]],
    sizes: Sequence[int],
    budget: int,
    recluster: Callable[[list[int]], list[list[int]]],
    *,
    max_depth: int = 4,
) -> list[list[int]]:
    """Re-cluster every cluster whose members' token sizes add up to more than ``budget``.

    ``recluster(members) -> clusters of members`` is tried first (RAPTOR's recursion); when
    it cannot split a cluster (one cluster back, or ``max_depth`` reached) the members are
    packed in order into groups under the budget. A single member over the budget stays
    alone (the summarizer truncates it).
    """
    out: list[list[int]] = []

    def total(members: list[int]) -> int:
        return sum(sizes[i] for i in members)

    def visit(members: list[int], depth: int) -> None:
        if total(members) <= budget or len(members) == 1:
            out.append(members)
            return
        parts: list[list[int]] = []
        if depth < max_depth:
            try:
                parts = [p for p in recluster(members) if p]
            except Exception as e:  # degenerate geometry: fall back to packing
                log.debug("re-clustering %d members failed (%s); packing", len(members), e)
                parts = []
        if len(parts) <= 1 or any(sorted(p) == sorted(members) for p in parts):
            out.extend(pack_in_order(members, sizes, budget))
            return
        for p in parts:
            visit(p, depth + 1)

    for c in clusters:
        visit(list(c), 0)
    return _dedupe(out)


def pack_in_order(members: Sequence[int], sizes: Sequence[int], budget: int) -> list[list[int]]:
    """Consecutive groups of ``members`` whose sizes stay under ``budget``."""
    groups: list[list[int]] = []
    used = 0
    for i in sorted(members):
        if groups and used + sizes[i] <= budget:
            groups[-1].append(i)
            used += sizes[i]
        else:
            groups.append([i])
            used = sizes[i]
    return groups


__all__ = [
    "DEFAULT_DIM",
    "DEFAULT_THRESHOLD",
    "GUIDED_MODES",
    "GuidedLayer",
    "MixtureFit",
    "best_component_count",
    "fit_mixture",
    "guided_clusters",
    "is_warm",
    "pack_in_order",
    "raptor_clusters",
    "reduce_dims",
    "soft_labels",
    "split_oversized",
    "warm_up",
]
