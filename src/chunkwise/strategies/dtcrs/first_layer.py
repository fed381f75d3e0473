"""DTCRS's first summary layer: leaves clustered around the sub-questions (one Gaussian
component per sub-question, over a UMAP fitted to leaves and sub-questions together), clusters
over the summarizer's budget split again."""

from __future__ import annotations

from typing import Any

import numpy as np

from chunkwise.strategies import clustering
from chunkwise.strategies.raptor import LayerGrower
from chunkwise.strategies.trees.nodes import Tree
from chunkwise.strategies.trees.select import SEPARATOR_TOKENS


def first_layer(
    tree: Tree,
    grower: LayerGrower,
    q_emb: np.ndarray,
    *,
    dim: int,
    threshold: float,
    seed: int,
    global_clustering: bool,
    recluster: str,
) -> tuple[list[list[int]], dict[str, Any]]:
    """Clusters of leaves guided by the sub-questions' embeddings ``q_emb`` (global node ids),
    and what the clustering did (for the run's stats)."""
    mode = "global" if global_clustering else "hierarchical"
    grower.warm()

    def guided(members: list[int], how: str) -> clustering.GuidedLayer:
        return clustering.guided_clusters(
            tree.embeddings[members],
            q_emb,
            dim=dim,
            threshold=threshold,
            mode=how,
            random_state=seed,
        )

    leaves = list(tree.layers[0])
    layer = guided(leaves, mode)
    clusters = [[leaves[i] for i in c] for c in layer.clusters]

    def split(members: list[int]) -> list[list[int]]:
        if recluster == "raptor":
            return grower.cluster(tree, members)
        # the reference recurses with the same sub-questions; its recursion does not
        # pass the cluster method on, so it runs the hierarchical scheme
        sub = guided(members, "hierarchical")
        return [[members[i] for i in c] for c in sub.clusters]

    sizes = [n.tokens + SEPARATOR_TOKENS for n in tree.nodes]
    before = len(clusters)
    clusters = clustering.split_oversized(clusters, sizes, grower.input_budget, split)
    info = {
        "first_layer_components": layer.mixture.n_components,
        "first_layer_clusters": len(clusters),
        "first_layer_mode": mode,
        "oversized_splits": len(clusters) - before,
        "unassigned_leaves": len(layer.unassigned),
    }
    return clusters, info


__all__ = ["first_layer"]
