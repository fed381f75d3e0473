"""RAPTOR: a static summary tree per document, then retrieval over the whole tree.

Build (once per document, cached by the document's hash and the settings that shape it):
leaves are chunks of whole sentences (100 tokens of the model's tokenizer); each layer is
clustered with UMAP + Gaussian mixtures (:func:`~.clustering.raptor_clusters`: global then
local, BIC-chosen component counts, soft membership above 0.1), clusters whose text exceeds
the summarizer's budget are re-clustered, and each cluster is summarized by the LLM into a
node of the next layer. Layers stop when a layer has too few nodes to cluster (``dim + 1``
or fewer), when clustering no longer reduces the node count, or at the layer cap.

Answer: collapsed-tree retrieval by default (every node ranked by cosine similarity to the
question, kept under a token budget, skipping a node that would overflow and scanning on),
or tree traversal (``retrieval=traversal``); then one answer call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from chunkwise.llm import LLM
from chunkwise.strategies import clustering
from chunkwise.strategies.base import Answer, Query, Stats, TraceEvent, register
from chunkwise.strategies.tree import (
    CONTEXT_ORDERS,
    SEPARATOR_TOKENS,
    EmbeddingStrategy,
    Node,
    Prompts,
    Tree,
    TreeCache,
    TreeRun,
    answer_from_context,
    build_context,
    check_option,
    context_budget,
    document_key,
    leaf_tree,
    load_prompts,
    query_text,
    select_nodes,
    summarize_clusters,
    summary_input_budget,
)

log = logging.getLogger(__name__)

RETRIEVAL_MODES = ("collapsed", "traversal")


class LayerGrower:
    """Builds summary layers on top of a tree with RAPTOR's clustering; shared with DTCRS
    (whose layers above the first are RAPTOR's)."""

    def __init__(
        self,
        run: TreeRun,
        prompts: Prompts,
        embed: Callable[[list[str]], np.ndarray],
        *,
        dim: int,
        threshold: float,
        input_budget: int,
        seed: int | None,
        temperature: float = 0.0,
    ):
        self.run = run
        self.prompts = prompts
        self.embed = embed
        self.dim = dim
        self.threshold = threshold
        self.input_budget = input_budget
        self.seed = seed
        self.temperature = temperature
        #: seconds spent compiling umap's kernels (the process's first fit), kept apart
        self.warmup_seconds = 0.0

    def warm(self) -> None:
        self.warmup_seconds += clustering.warm_up()

    def cluster(self, tree: Tree, members: list[int]) -> list[list[int]]:
        """RAPTOR clusters of tree nodes ``members`` (global node ids in, global ids out)."""
        self.warm()
        local = clustering.raptor_clusters(
            tree.embeddings[members], dim=self.dim, threshold=self.threshold, random_state=self.seed
        )
        return [[members[i] for i in c] for c in local]

    def fit_budget(self, tree: Tree, clusters: list[list[int]]) -> list[list[int]]:
        sizes = [n.tokens + SEPARATOR_TOKENS for n in tree.nodes]
        return clustering.split_oversized(
            clusters, sizes, self.input_budget, lambda m: self.cluster(tree, m)
        )

    def summarize(self, tree: Tree, clusters: list[list[int]], layer: int) -> list[Node]:
        return summarize_clusters(
            self.run,
            self.prompts,
            tree,
            clusters,
            layer,
            self.input_budget,
            self.embed,
            self.temperature,
        )

    def grow(self, tree: Tree, current: list[int], max_layers: int) -> str:
        """Add layers above ``current`` until a stop rule holds; returns which one did."""
        while len(tree.layers) - 1 < max_layers:
            if len(current) <= self.dim + 1:
                return "too few nodes"
            clusters = self.fit_budget(tree, self.cluster(tree, current))
            if len(clusters) >= len(current):
                return "no reduction"
            nodes = self.summarize(tree, clusters, len(tree.layers))
            current = [n.index for n in nodes]
        return "layer cap"


@register
class Raptor(EmbeddingStrategy):
    """Options (``--strategy-args k=v``):

    chunk_tokens        leaf size in the model's tokens, whole sentences (100)
    dim                 UMAP components (10); also the stop rule: a layer of dim + 1 or
                        fewer nodes is not clustered
    threshold           soft-membership threshold on mixture posteriors (0.1)
    max_layers          cap on summary layers (5)
    max_cluster_tokens  the summarizer's input budget; larger clusters are re-clustered (3500)
    summary_tokens      summary length (0 = the prompt set's, 100)
    retrieval           collapsed | traversal
    top_k               collapsed: most nodes read (0 = budget only); traversal: nodes kept
                        per layer (0 = 5)
    max_context_tokens  token budget of the retrieved text (2000)
    embedder            dense encoder for chunkwise.embed: minilm, hashing, st:PATH or a
                        local sentence-transformers folder (long texts embedded by windows)
    context_order       relevance | document
    cache_dir           also keep trees as JSON files here (default: in memory only)
    seed                UMAP random state (mixtures use RAPTOR's fixed seeds)
    prompts             auto | chat | base
    temperature         decoding temperature for summaries and the answer
    """

    name = "raptor"

    def __init__(
        self,
        window: int | None = None,
        chunk_tokens: int = 100,
        dim: int = clustering.DEFAULT_DIM,
        threshold: float = clustering.DEFAULT_THRESHOLD,
        max_layers: int = 5,
        max_cluster_tokens: int = 3500,
        summary_tokens: int = 0,
        retrieval: str = "collapsed",
        top_k: int = 0,
        max_context_tokens: int = 2000,
        embedder: str = "minilm",
        context_order: str = "relevance",
        cache_dir: str = "",
        seed: int = 0,
        prompts: str = "auto",
        temperature: float = 0.0,
    ):
        super().__init__(window)
        check_option("raptor", "retrieval", retrieval, choices=RETRIEVAL_MODES)
        check_option("raptor", "chunk_tokens", chunk_tokens, minimum=1)
        check_option("raptor", "dim", dim, minimum=1)
        check_option("raptor", "max_layers", max_layers, minimum=0)
        check_option("raptor", "threshold", threshold, fraction=True)
        check_option("raptor", "context_order", context_order, choices=CONTEXT_ORDERS)
        self.chunk_tokens = chunk_tokens
        self.dim = dim
        self.threshold = threshold
        self.max_layers = max_layers
        self.max_cluster_tokens = max_cluster_tokens
        self.summary_tokens = summary_tokens
        self.retrieval = retrieval
        self.top_k = top_k
        self.max_context_tokens = max_context_tokens
        self.embedder = embedder
        self.context_order = context_order
        self.seed = seed
        self.prompts = prompts
        self.temperature = temperature
        self.cache = TreeCache(cache_dir or None)

    def _summary_prompts(self, llm: LLM, family: str) -> Prompts:
        p = load_prompts("raptor", llm, family, self.prompts)
        if self.summary_tokens > 0:
            p.templates = {**p.templates, "summarize_max_new_tokens": self.summary_tokens}
        return p

    def tree_key(self, document: str, llm: LLM, p: Prompts) -> str:
        return document_key(
            document,
            "raptor",
            self.chunk_tokens,
            self.dim,
            self.threshold,
            self.max_layers,
            self.max_cluster_tokens,
            p.templates["summarize_max_new_tokens"],
            self.embedder,
            self.seed,
            self.temperature,
            llm.spec,
            p.kind,
            p.templates["version"],
            self.effective_window(llm),
        )

    def build_tree(self, document: str, run: TreeRun, p: Prompts) -> Tree:
        """Build the tree of ``document`` (no cache). ``tree.build`` records how."""
        t0 = time.perf_counter()
        emb = self._embedder()
        tree = leaf_tree(document, run.llm, self.chunk_tokens, emb.encode)
        grower = LayerGrower(
            run,
            p,
            emb.encode,
            dim=self.dim,
            threshold=self.threshold,
            input_budget=summary_input_budget(
                run, p, self.effective_window(run.llm), self.max_cluster_tokens
            ),
            seed=self.seed,
            temperature=self.temperature,
        )
        stop = grower.grow(tree, [n.index for n in tree.nodes], self.max_layers)
        total = time.perf_counter() - t0
        tree.build = {
            "seconds": round(total - grower.warmup_seconds, 3),
            "umap_warmup_seconds": round(grower.warmup_seconds, 3),
            "summary_nodes": tree.summary_nodes,
            "leaves": len(tree.layers[0]),
            "layers": len(tree.layers) - 1,
            "nodes_per_layer": [len(x) for x in tree.layers],
            "stop": stop,
            "summarize_calls": tree.summary_nodes,
        }
        return tree

    def run(self, document: str, query: Query, llm: LLM) -> Answer:
        stats = Stats()
        trace: list[TraceEvent] = []
        run = TreeRun(llm, stats, trace)
        p = self._summary_prompts(llm, query.task)
        key = self.tree_key(document, llm, p)
        tree = self.cache.get(key)
        cached = tree is not None
        if tree is None:
            tree = self.build_tree(document, run, p)
            self.cache.put(key, tree)
        info: dict[str, Any] = tree.build
        stats.extra.update(
            summary_nodes=0 if cached else tree.summary_nodes,
            build_seconds=0.0 if cached else info["seconds"],
            umap_warmup_seconds=0.0 if cached else info["umap_warmup_seconds"],
            tree_cached=cached,
            # what a cached tree saved this question (bench/trees.py adds it back for its
            # "as if nothing were cached" view)
            reused_seconds=info["seconds"] if cached else 0.0,
            reused_summary_calls=tree.summary_nodes if cached else 0,
            tree_summary_nodes=tree.summary_nodes,
            tree_build_seconds=info["seconds"],
            tree_layers=info["layers"],
            tree_nodes_per_layer=info["nodes_per_layer"],
            tree_stop=info["stop"],
            leaves=info["leaves"],
        )
        ap = load_prompts("retrieval", llm, query.task, self.prompts)
        budget = context_budget(run, ap, query, self.effective_window(llm), self.max_context_tokens)
        emb = self._embedder()
        picked = select_nodes(
            tree,
            emb.encode([query_text(query)]),
            emb.similarity,
            self.retrieval,
            budget,
            self.top_k,
        )
        ctx = build_context(tree.nodes, picked, self.context_order)
        text = answer_from_context(run, ap, query, ctx, self.temperature)
        stats.extra.update(
            retrieval=self.retrieval,
            retrieved=len(picked),
            retrieved_summaries=sum(1 for i in picked if tree.nodes[i].layer > 0),
            context_tokens=ctx.tokens,
            context_budget=budget,
            prompt_kind=p.kind,
            prompt_version=f"{p.templates['version']}+{ap.templates['version']}",
        )
        return Answer(text, trace, stats)
