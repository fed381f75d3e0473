"""The DTCRS strategy: its options, the per-document caches (table of contents, leaves) and a
run's stages in order; the stages' own work lives in the modules beside this one.
"""

from __future__ import annotations

import logging
import time

from chunkwise.llm import LLM
from chunkwise.strategies import clustering
from chunkwise.strategies.base import Answer, Query, Stats, TraceEvent, check_option, register
from chunkwise.strategies.dtcrs.excerpts import TOC_INPUTS, head_excerpt, spread_excerpt
from chunkwise.strategies.dtcrs.first_layer import first_layer
from chunkwise.strategies.dtcrs.presets import PRESETS, RECLUSTER
from chunkwise.strategies.dtcrs.questions import SUBQUESTION_PARSERS, classify, decompose
from chunkwise.strategies.raptor import LayerGrower
from chunkwise.strategies.retrieval import Retrieval
from chunkwise.strategies.trees.answering import answer_from_context, context_budget
from chunkwise.strategies.trees.cache import LRU
from chunkwise.strategies.trees.calls import Prompts, TreeRun, load_prompts, timed
from chunkwise.strategies.trees.leaves import document_key, leaf_tree
from chunkwise.strategies.trees.nodes import Tree
from chunkwise.strategies.trees.options import EmbeddingStrategy
from chunkwise.strategies.trees.select import (
    CONTEXT_ORDERS,
    build_context,
    query_text,
    select_nodes,
)
from chunkwise.strategies.trees.summaries import summary_input_budget
from chunkwise.text import chunk_budget

log = logging.getLogger(__name__)


@register
class DTCRS(EmbeddingStrategy):
    """Options (``--strategy-args k=v``); "ref" marks the reference code's value, ``v1``
    this project's earlier one (``preset=v1`` selects all of them):

    preset              reference | v1: where the unset options below come from (reference)
    chunk_tokens        chunk size for the tree, whole sentences (500)
    dim, threshold      UMAP components (10) and soft-membership threshold (0.1)
    min_leaves          fewest leaves that get a summary layer (ref 0 = dim + 2; v1 2)
    max_layers          cap on summary layers (5)
    max_cluster_tokens  the summarizer's input budget; larger clusters are re-clustered
                        (ref 10000; v1 3500; never more than fits the window)
    recluster           guided (ref: by the same sub-questions) | raptor (v1: RAPTOR's
                        clustering); both pack in document order when that cannot split
    summary_tokens      summary length (0 = the prompt set's, 100)
    max_context_tokens  token budget of the retrieved text (ref 3500; v1 2000)
    top_k               most tree nodes read (ref 10; v1 0 = budget only)
    toc_input           head (ref: the first toc_input_chars characters) | spread (v1:
                        evenly spaced runs of sentences over the whole document)
    toc_input_chars     head: characters read (ref 125000; 0 = all)
    toc_input_tokens    cap on the tokens the table of contents reads (ref 0 = what fits the
                        window; v1 3000)
    subquestions        lines (ref: every non-empty line) | numbered (v1: list items and
                        lines ending in "?")
    min_subquestions    fewest accepted before a retry / the fallback (ref 1; v1 2)
    max_subquestions    cap (ref 0 = none; v1 5)
    decompose_retries   extra attempts, sampled at temperature 0.7 (ref 0; v1 2)
    classifier, toc, decomposition, global_clustering   ablation switches (all true)
    dpr_chunk_tokens, dpr_top_k   the retrieval route for simple questions (100, 5)
    embedder            dense encoder for chunkwise.embed: minilm, hashing, st:PATH or a
                        local sentence-transformers folder (long chunks embedded by windows)
    context_order       relevance | document
    seed                UMAP random state
    prompts             auto | chat | base
    temperature         decoding temperature for every stage but decomposition retries
    """

    name = "dtcrs"

    def __init__(
        self,
        window: int | None = None,
        preset: str = "reference",
        chunk_tokens: int = 500,
        dim: int = clustering.DEFAULT_DIM,
        threshold: float = clustering.DEFAULT_THRESHOLD,
        min_leaves: int | None = None,
        max_layers: int = 5,
        max_cluster_tokens: int | None = None,
        recluster: str | None = None,
        summary_tokens: int = 0,
        max_context_tokens: int | None = None,
        top_k: int | None = None,
        toc_input: str | None = None,
        toc_input_chars: int | None = None,
        toc_input_tokens: int | None = None,
        subquestions: str | None = None,
        min_subquestions: int | None = None,
        max_subquestions: int | None = None,
        decompose_retries: int | None = None,
        classifier: bool = True,
        toc: bool = True,
        decomposition: bool = True,
        global_clustering: bool = True,
        dpr_chunk_tokens: int = 100,
        dpr_top_k: int = 5,
        embedder: str = "minilm",
        context_order: str = "relevance",
        seed: int = 0,
        prompts: str = "auto",
        temperature: float = 0.0,
    ):
        super().__init__(window)
        check_option("dtcrs", "preset", preset, choices=tuple(PRESETS))
        given = {
            "min_leaves": min_leaves,
            "max_cluster_tokens": max_cluster_tokens,
            "recluster": recluster,
            "subquestions": subquestions,
            "min_subquestions": min_subquestions,
            "max_subquestions": max_subquestions,
            "decompose_retries": decompose_retries,
            "max_context_tokens": max_context_tokens,
            "top_k": top_k,
            "toc_input": toc_input,
            "toc_input_chars": toc_input_chars,
            "toc_input_tokens": toc_input_tokens,
        }
        settings = {k: PRESETS[preset][k] if v is None else v for k, v in given.items()}
        for name in ("chunk_tokens", "dim"):
            check_option("dtcrs", name, locals()[name], minimum=1)
        for name in ("min_subquestions",):
            check_option("dtcrs", name, settings[name], minimum=1)
        for name in (
            "min_leaves",
            "max_subquestions",
            "decompose_retries",
            "max_context_tokens",
            "top_k",
            "toc_input_chars",
            "toc_input_tokens",
        ):
            check_option("dtcrs", name, settings[name], minimum=0)
        if settings["max_subquestions"]:
            check_option(
                "dtcrs",
                "max_subquestions",
                settings["max_subquestions"],
                minimum=settings["min_subquestions"],
            )
        check_option("dtcrs", "threshold", threshold, fraction=True)
        check_option("dtcrs", "context_order", context_order, choices=CONTEXT_ORDERS)
        check_option("dtcrs", "recluster", settings["recluster"], choices=RECLUSTER)
        check_option(
            "dtcrs", "subquestions", settings["subquestions"], choices=tuple(SUBQUESTION_PARSERS)
        )
        check_option("dtcrs", "toc_input", settings["toc_input"], choices=TOC_INPUTS)
        self.preset = preset
        self.chunk_tokens = chunk_tokens
        self.dim = dim
        self.threshold = threshold
        self.min_leaves: int = settings["min_leaves"]
        self.max_layers = max_layers
        self.max_cluster_tokens: int = settings["max_cluster_tokens"]
        self.recluster: str = settings["recluster"]
        self.summary_tokens = summary_tokens
        self.max_context_tokens: int = settings["max_context_tokens"]
        self.top_k: int = settings["top_k"]
        self.toc_input: str = settings["toc_input"]
        self.toc_input_chars: int = settings["toc_input_chars"]
        self.toc_input_tokens: int = settings["toc_input_tokens"]
        self.subquestions: str = settings["subquestions"]
        self.min_subquestions: int = settings["min_subquestions"]
        self.max_subquestions: int = settings["max_subquestions"]
        self.decompose_retries: int = settings["decompose_retries"]
        self.classifier = classifier
        self.toc = toc
        self.decomposition = decomposition
        self.global_clustering = global_clustering
        self.embedder = embedder
        self.context_order = context_order
        self.seed = seed
        self.prompts = prompts
        self.temperature = temperature
        self.dpr = Retrieval(
            window,
            chunk_tokens=dpr_chunk_tokens,
            top_k=dpr_top_k,
            max_context_tokens=self.max_context_tokens,
            embedder=embedder,
            context_order=context_order,
            prompts=prompts,
            temperature=temperature,
        )
        #: per document: (table of contents, seconds it took); leaves and their embeddings
        self._tocs: LRU[tuple[str, float]] = LRU(16)
        self._leaves: LRU[tuple[Tree, float]] = LRU(8)

    @property
    def leaf_threshold(self) -> int:
        """Fewest leaves that get a summary layer (the reference: more than ``dim + 1``)."""
        return self.min_leaves if self.min_leaves > 0 else self.dim + 2

    def _prompts(self, llm: LLM, family: str) -> Prompts:
        p = load_prompts("dtcrs", llm, family, self.prompts)
        if self.summary_tokens > 0:
            p.templates = {**p.templates, "summarize_max_new_tokens": self.summary_tokens}
        return p

    # -- stages --------------------------------------------------------------------------
    def toc_input_text(self, document: str, llm: LLM, room: int) -> str:
        """What the table of contents is written from, in at most ``room`` tokens."""
        cap = min(self.toc_input_tokens, room) if self.toc_input_tokens > 0 else room
        if self.toc_input == "head":
            return head_excerpt(document, llm, self.toc_input_chars, cap)
        return spread_excerpt(document, llm, cap)

    def table_of_contents(self, document: str, run: TreeRun, p: Prompts) -> tuple[str, bool, float]:
        """The document's table of contents (cached per document). Returns (toc, cached,
        seconds writing it took, the first time)."""
        window = self.effective_window(run.llm)
        key = document_key(
            document,
            run.llm.spec,
            p.kind,
            p.templates["version"],
            window,
            self.toc_input,
            self.toc_input_chars,
            self.toc_input_tokens,
        )
        hit = self._tocs.get(key)
        if hit is not None:
            return hit[0], True, hit[1]
        t0 = time.perf_counter()
        params = p.params("toc", self.temperature)
        template = run.prompt_tokens(p.render("toc", document=""))
        room = chunk_budget(window, template, 0, params.max_new_tokens)
        excerpt = self.toc_input_text(document, run.llm, room)
        out = run.call("toc", [p.render("toc", document=excerpt)], params)[0]
        toc = (p.templates.get("toc_lead", "") + out.text).strip()
        seconds = time.perf_counter() - t0
        self._tocs.put(key, (toc, seconds))
        return toc, False, seconds

    def leaves(self, document: str, llm: LLM) -> tuple[Tree, bool, float]:
        """Chunks and their embeddings (cached per document; copied so a question's summary
        layers never leak into another's tree). Returns (tree, cached, seconds the leaves
        took when they were built)."""
        key = document_key(document, self.chunk_tokens, self.embedder, llm.spec)
        hit = self._leaves.get(key)
        cached = hit is not None
        if hit is None:
            hit = timed(
                lambda: leaf_tree(document, llm, self.chunk_tokens, self._embedder().encode)
            )
            self._leaves.put(key, hit)
        base, seconds = hit
        return base.leaves_only(), cached, seconds

    # -- the pipeline ----------------------------------------------------------------------
    def run(self, document: str, query: Query, llm: LLM) -> Answer:
        t0 = time.perf_counter()
        stats = Stats()
        trace: list[TraceEvent] = []
        run = TreeRun(llm, stats, trace)
        p = self._prompts(llm, query.task)
        window = self.effective_window(llm)
        extra = stats.extra
        extra.update(
            route="tree",
            summary_nodes=0,
            toc_cached=False,
            toc_seconds=0.0,
            umap_warmup_seconds=0.0,
            reused_seconds=0.0,
            reused_summary_calls=0,
            preset=self.preset,
            ablation={
                "classifier": self.classifier,
                "toc": self.toc,
                "decomposition": self.decomposition,
                "global_clustering": self.global_clustering,
            },
            prompt_kind=p.kind,
        )

        toc = ""
        if self.toc and (self.classifier or self.decomposition):
            t_toc = time.perf_counter()
            toc, cached, first = self.table_of_contents(document, run, p)
            extra.update(toc_cached=cached, toc_seconds=round(time.perf_counter() - t_toc, 3))
            if cached:  # what writing it took, the first time (not paid again here)
                extra["reused_seconds"] = round(first, 3)

        if self.classifier and not classify(self, run, p, toc, query):
            extra["route"] = "retrieval"
            extra["build_seconds"] = round(time.perf_counter() - t0, 3)
            ans = self.dpr.answer_into(document, query, llm, stats, trace)
            extra["build_seconds"] = round(extra["build_seconds"] + extra["index_seconds"], 3)
            extra["prompt_version"] = f"{p.templates['version']}+{extra['prompt_version']}"
            return ans

        if self.decomposition:
            subs, fallback = decompose(self, run, p, toc, query)
        else:
            subs, fallback = [query.question.strip()], False
        extra.update(subquestions=subs, decomposition_fallback=fallback)

        tree, leaves_cached, leaf_seconds = self.leaves(document, llm)
        if leaves_cached:
            extra["reused_seconds"] = round(extra["reused_seconds"] + leaf_seconds, 3)
        emb = self._embedder()
        grower = LayerGrower(
            run,
            p,
            emb.encode,
            dim=self.dim,
            threshold=self.threshold,
            input_budget=summary_input_budget(run, p, window, self.max_cluster_tokens),
            seed=self.seed,
            temperature=self.temperature,
        )
        stop = "too few leaves"
        if len(tree.layers[0]) >= self.leaf_threshold and self.max_layers > 0:
            clusters, info = first_layer(
                tree,
                grower,
                emb.encode(subs),
                dim=self.dim,
                threshold=self.threshold,
                seed=self.seed,
                global_clustering=self.global_clustering,
                recluster=self.recluster,
            )
            extra.update(info)
            nodes = grower.summarize(tree, clusters, 1)
            stop = grower.grow(tree, [n.index for n in nodes], self.max_layers)
        build = time.perf_counter() - t0 - grower.warmup_seconds
        extra.update(
            summary_nodes=tree.summary_nodes,
            build_seconds=round(build, 3),
            umap_warmup_seconds=round(grower.warmup_seconds, 3),
            leaves=len(tree.layers[0]),
            leaves_cached=leaves_cached,
            leaf_seconds=round(0.0 if leaves_cached else leaf_seconds, 3),
            tree_layers=len(tree.layers) - 1,
            tree_nodes_per_layer=[len(x) for x in tree.layers],
            tree_stop=stop,
        )

        ap = load_prompts("retrieval", llm, query.task, self.prompts)
        budget = context_budget(run, ap, query, window, self.max_context_tokens)
        picked = select_nodes(
            tree, emb.encode([query_text(query)]), emb.similarity, "collapsed", budget, self.top_k
        )
        ctx = build_context(tree.nodes, picked, self.context_order)
        text = answer_from_context(run, ap, query, ctx, self.temperature)
        extra.update(
            retrieved=len(picked),
            retrieved_summaries=sum(1 for i in picked if tree.nodes[i].layer > 0),
            context_tokens=ctx.tokens,
            context_budget=budget,
            prompt_version=f"{p.templates['version']}+{ap.templates['version']}",
        )
        return Answer(text, trace, stats)


__all__ = ["DTCRS"]
