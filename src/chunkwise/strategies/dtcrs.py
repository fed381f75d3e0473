"""DTCRS: a summary tree built per question, guided by its sub-questions.

Per question:

1. **Table of contents** of the document, written by the LLM (cached per document: it does
   not depend on the question). Reference setting: from the document's first 125,000
   characters (``toc_input=head``), cut further, keeping the head, to what fits the window.
2. **Classifier**: given the table of contents, does the question need information from
   several sections? A "no" sends the question to DPR-style retrieval (:class:`Retrieval`).
3. **Decomposition**: the question is broken into sub-questions, guided by the table of
   contents. Reference setting: every non-empty line of the reply is a sub-question (its
   list marker removed), no cap and no retries; an empty reply leaves the question itself.
4. **First layer**: 500-token chunks of whole sentences; no summary layer at all when there
   are ``dim + 1`` (11) or fewer chunks (the reference's stop rule applies at layer 0 too).
   Otherwise chunk and sub-question embeddings are reduced by one UMAP fit together and a
   Gaussian mixture with exactly one component per sub-question, means initialised at the
   reduced sub-question points, gives soft clusters (posterior above the threshold).
   A cluster over 10,000 tokens is re-clustered, guided by the same sub-questions (the
   reference recurses into its clustering with the sub-questions; its recursion falls back
   to the hierarchical scheme), and packed in document order only when that cannot split it.
5. **Higher layers** as RAPTOR (BIC, global + local), usually none: the first layer has as
   many nodes as sub-questions, below RAPTOR's stop rule.
6. **Collapsed-tree retrieval** over leaves and summaries (3,500 tokens, at most 10 nodes),
   then one answer call.

Defaults follow the reference code (luoguanran/DTCRS: ``cluster_tree_builder.py``,
``cluster_utils.py``, ``query_breakdown.py``, ``RetrievalAugmentation.py``); ``preset=v1``
restores this project's earlier settings (2 leaves suffice for a layer, 3,500-token clusters
split by RAPTOR's clustering then document order, numbered sub-questions only, 2 to 5 of
them with 2 sampled retries, a 2,000-token retrieval budget, the table of contents from an
evenly spaced 3,000-token excerpt). Any option given explicitly overrides the preset.

Ablation switches (the paper's): ``classifier=false`` (every question builds a tree),
``toc=false`` (classifier and decomposer see only the question), ``decomposition=false`` (the
question itself is the only guide: a one-component first layer), ``global_clustering=false``
(the reference's ``cluster_method=hierarchical``: the joint UMAP uses ``sqrt(N - 1)``
neighbours instead of 10, and each guided cluster of more than ``dim + 1`` chunks is split
again by RAPTOR's local stage).
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import numpy as np

from chunkwise.llm import LLM
from chunkwise.strategies import clustering
from chunkwise.strategies.base import Answer, Query, Stats, TraceEvent, register
from chunkwise.strategies.raptor import LayerGrower
from chunkwise.strategies.retrieval import Retrieval
from chunkwise.strategies.tree import (
    CONTEXT_ORDERS,
    LRU,
    SEPARATOR_TOKENS,
    EmbeddingStrategy,
    Prompts,
    Tree,
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
    sentence_chunks,
    summary_input_budget,
    timed,
)
from chunkwise.text import chunk_budget

log = logging.getLogger(__name__)

_NUMBERED = re.compile(r"^\s*(?:\(?\d+[.):]|[-*•]|Q\d+[.:]|Sub-?question\s*\d*[.:])\s*", re.I)
_YES = re.compile(r"\byes\b", re.I)


def parse_subquestions(text: str, limit: int = 0) -> list[str]:
    """Sub-questions from a numbered or bulleted list, one per line; bare lines count only
    when they end with a question mark. Duplicates (case-insensitive) are dropped.
    (``subquestions=numbered``, this project's earlier rule.)"""
    out: list[str] = []
    seen: set[str] = set()
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        numbered = bool(_NUMBERED.match(line))
        body = _NUMBERED.sub("", line).strip().strip('"').strip()
        if not body or (not numbered and not body.endswith("?")):
            continue
        if len(body.split()) < 2:
            continue
        key = " ".join(body.lower().split())
        if key in seen:
            continue
        seen.add(key)
        out.append(body)
        if limit and len(out) >= limit:
            break
    return out


def parse_yes(text: str) -> bool:
    """The classifier's label: "yes" anywhere in the reply (the DTCRS code's rule)."""
    return bool(_YES.search(text))


def spread_excerpt(document: str, llm: LLM, budget: int, piece_tokens: int = 120) -> str:
    """``document`` if it fits ``budget`` tokens, else evenly spaced runs of whole sentences
    (about ``piece_tokens`` each) that together fit, joined by an ellipsis line."""
    if llm.count_tokens(document) <= budget:
        return document.strip()
    # pieces small enough that at least ~6 of them fit, so the excerpt spans the document
    piece_tokens = max(16, min(piece_tokens, budget // 6))
    pieces = sentence_chunks(document, llm, piece_tokens)
    if not pieces:
        return ""
    sep_cost = 4
    k = max(1, budget // (piece_tokens + sep_cost))
    picks = sorted({round(x) for x in np.linspace(0, len(pieces) - 1, min(k, len(pieces)))})
    chosen, used = [], 0
    for i in picks:
        text, n = pieces[i]
        if used + n + sep_cost > budget:
            continue
        chosen.append(text)
        used += n + sep_cost
    return "\n...\n".join(chosen)


def parse_lines(text: str, limit: int = 0) -> list[str]:
    """Every non-empty line is a sub-question (the reference's rule), its list marker
    ("1.", "-", "Sub-question 2:") removed; a line with nothing after its marker is skipped."""
    out = []
    for line in text.splitlines():
        body = _NUMBERED.sub("", line.strip()).strip()
        if body:
            out.append(body)
            if limit and len(out) >= limit:
                break
    return out


SUBQUESTION_PARSERS = {"lines": parse_lines, "numbered": parse_subquestions}


def head_excerpt(document: str, llm: LLM, max_chars: int, budget: int) -> str:
    """The document's first ``max_chars`` characters (0 = all), cut further, at a token
    boundary, to at most ``budget`` tokens (the head is kept)."""
    text = document[:max_chars] if max_chars > 0 else document
    offsets = llm.token_offsets(text)
    if len(offsets) <= budget:
        return text.strip()
    keep = budget
    while keep > 0:
        cut = text[: offsets[keep - 1][1]]
        if llm.count_tokens(cut) <= budget:
            return cut.strip()
        keep -= 8
    return ""


TOC_INPUTS = ("head", "spread")

#: the reference code's settings (luoguanran/DTCRS), and this project's earlier ones
PRESETS: dict[str, dict[str, Any]] = {
    "reference": {
        "min_leaves": 0,  # 0 = dim + 2: a layer needs more than dim + 1 leaves
        "max_cluster_tokens": 10000,
        "recluster": "guided",
        "subquestions": "lines",
        "min_subquestions": 1,
        "max_subquestions": 0,
        "decompose_retries": 0,
        "max_context_tokens": 3500,
        "top_k": 10,
        "toc_input": "head",
        "toc_input_chars": 125000,
        "toc_input_tokens": 0,
    },
    "v1": {
        "min_leaves": 2,
        "max_cluster_tokens": 3500,
        "recluster": "raptor",
        "subquestions": "numbered",
        "min_subquestions": 2,
        "max_subquestions": 5,
        "decompose_retries": 2,
        "max_context_tokens": 2000,
        "top_k": 0,
        "toc_input": "spread",
        "toc_input_chars": 0,
        "toc_input_tokens": 3000,
    },
}
RECLUSTER = ("guided", "raptor")


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

    def classify(self, run: TreeRun, p: Prompts, toc: str, query: Query) -> bool:
        name = "classify" if self.toc else "classify_no_toc"
        out = run.call(
            "classify",
            [p.render(name, toc=toc, question=query.question.strip())],
            p.params("classify", self.temperature),
        )[0]
        return parse_yes(out.text)

    def decompose(self, run: TreeRun, p: Prompts, toc: str, query: Query) -> tuple[list[str], bool]:
        """Sub-questions (at least ``min_subquestions`` when the model gives them). Returns
        (sub-questions, whether the fallback had to add the original question)."""
        name = "decompose" if self.toc else "decompose_no_toc"
        prompt = p.render(name, toc=toc, question=query.question.strip())
        lead = p.templates.get("decompose_lead", "")
        parse = SUBQUESTION_PARSERS[self.subquestions]
        best: list[str] = []
        for attempt in range(1 + self.decompose_retries):
            params = p.params("decompose", self.temperature)
            if attempt:
                params = params.with_(temperature=0.7, seed=self.seed + attempt)
            out = run.call("decompose", [prompt], params)[0]
            subs = parse(lead + out.text, self.max_subquestions)
            if len(subs) > len(best):
                best = subs
            if len(best) >= self.min_subquestions:
                return best, False
        q = query.question.strip()
        merged = [*best, q] if all(s.lower() != q.lower() for s in best) else best
        return (merged[: self.max_subquestions] if self.max_subquestions else merged), True

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

    def first_layer(
        self, tree: Tree, grower: LayerGrower, subquestions: list[str]
    ) -> tuple[list[list[int]], dict[str, Any]]:
        """Clusters of leaves guided by the sub-questions (global node ids)."""
        q_emb = self._embedder().encode(subquestions)
        mode = "global" if self.global_clustering else "hierarchical"
        grower.warm()

        def guided(members: list[int], how: str) -> clustering.GuidedLayer:
            return clustering.guided_clusters(
                tree.embeddings[members],
                q_emb,
                dim=self.dim,
                threshold=self.threshold,
                mode=how,
                random_state=self.seed,
            )

        leaves = list(tree.layers[0])
        layer = guided(leaves, mode)
        clusters = [[leaves[i] for i in c] for c in layer.clusters]

        def recluster(members: list[int]) -> list[list[int]]:
            if self.recluster == "raptor":
                return grower.cluster(tree, members)
            # the reference recurses with the same sub-questions; its recursion does not
            # pass the cluster method on, so it runs the hierarchical scheme
            sub = guided(members, "hierarchical")
            return [[members[i] for i in c] for c in sub.clusters]

        sizes = [n.tokens + SEPARATOR_TOKENS for n in tree.nodes]
        before = len(clusters)
        clusters = clustering.split_oversized(clusters, sizes, grower.input_budget, recluster)
        info = {
            "first_layer_components": layer.mixture.n_components,
            "first_layer_clusters": len(clusters),
            "first_layer_mode": mode,
            "oversized_splits": len(clusters) - before,
            "unassigned_leaves": len(layer.unassigned),
        }
        return clusters, info

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

        if self.classifier and not self.classify(run, p, toc, query):
            extra["route"] = "retrieval"
            extra["build_seconds"] = round(time.perf_counter() - t0, 3)
            ans = self.dpr.answer_into(document, query, llm, stats, trace)
            extra["build_seconds"] = round(extra["build_seconds"] + extra["index_seconds"], 3)
            extra["prompt_version"] = f"{p.templates['version']}+{extra['prompt_version']}"
            return ans

        if self.decomposition:
            subs, fallback = self.decompose(run, p, toc, query)
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
            clusters, info = self.first_layer(tree, grower, subs)
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


__all__ = [
    "DTCRS",
    "PRESETS",
    "SEPARATOR_TOKENS",
    "head_excerpt",
    "parse_lines",
    "parse_subquestions",
    "parse_yes",
    "spread_excerpt",
]
