"""DTCRS: a summary tree built per question, guided by its sub-questions.

Per question:

1. **Table of contents** of the document, written by the LLM from a capped input (cached per
   document: it does not depend on the question). When the document exceeds the cap, the
   input is spread over the whole document: evenly spaced runs of sentences, joined by
   "...", so every part of it can show up in the table.
2. **Classifier**: given the table of contents, does the question need information from
   several sections? A "no" sends the question to DPR-style retrieval (:class:`Retrieval`).
3. **Decomposition**: the question is broken into sub-questions, guided by the table of
   contents; fewer than ``min_subquestions`` triggers retries (sampled), then the original
   question is added as a sub-question.
4. **First layer**: 500-token chunks of whole sentences; chunk and sub-question embeddings
   reduced by one UMAP fit together; a Gaussian mixture with exactly one component per
   sub-question, means initialised at the reduced sub-question points, soft membership
   above the threshold. Clusters over the summarizer's budget are re-clustered.
5. **Higher layers** as RAPTOR (BIC, global + local), usually none: the first layer has as
   many nodes as sub-questions, below RAPTOR's stop rule.
6. **Collapsed-tree retrieval** over leaves and summaries, then one answer call.

Ablation switches (the paper's): ``classifier=false`` (every question builds a tree),
``toc=false`` (classifier and decomposer see only the question), ``decomposition=false`` (the
question itself is the only guide: a one-component first layer), ``global_clustering=false``
(each guided cluster is re-clustered locally as in RAPTOR's hierarchical scheme).
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import numpy as np

from chunkwise.errors import BadInput
from chunkwise.llm import LLM
from chunkwise.strategies import clustering
from chunkwise.strategies.base import Answer, Query, Stats, Strategy, TraceEvent, register
from chunkwise.strategies.raptor import SEPARATOR_TOKENS, LayerGrower, leaf_tree, select_nodes
from chunkwise.strategies.retrieval import Retrieval
from chunkwise.strategies.tree import (
    Prompts,
    Tree,
    TreeRun,
    answer_from_context,
    build_context,
    context_budget,
    document_key,
    load_prompts,
    query_text,
    sentence_chunks,
    summary_input_budget,
)
from chunkwise.text import chunk_budget

log = logging.getLogger(__name__)

_NUMBERED = re.compile(r"^\s*(?:\(?\d+[.):]|[-*•]|Q\d+[.:]|Sub-?question\s*\d*[.:])\s*", re.I)
_YES = re.compile(r"\byes\b", re.I)


def parse_subquestions(text: str, limit: int = 0) -> list[str]:
    """Sub-questions from a numbered or bulleted list, one per line; bare lines count only
    when they end with a question mark. Duplicates (case-insensitive) are dropped."""
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


@register
class DTCRS(Strategy):
    """Options (``--strategy-args k=v``):

    chunk_tokens        chunk size for the tree, whole sentences (500)
    dim, threshold      UMAP components (10) and soft-membership threshold (0.1)
    max_layers          cap on summary layers (5)
    max_cluster_tokens  the summarizer's input budget; larger clusters are re-clustered (3500)
    summary_tokens      summary length (0 = the prompt set's, 100)
    max_context_tokens  token budget of the retrieved text (2000)
    top_k               most tree nodes read (0 = budget only)
    toc_input_tokens    cap on the document text the table of contents is written from (3000)
    min_subquestions    fewest sub-questions accepted (2); max_subquestions caps them (5)
    decompose_retries   extra decomposition attempts, sampled at temperature 0.7 (2)
    classifier, toc, decomposition, global_clustering   ablation switches (all true)
    dpr_chunk_tokens, dpr_top_k   the retrieval route for simple questions (100, 5)
    embedder            dense encoder for chunkwise.embed (minilm)
    context_order       relevance | document
    seed                UMAP random state
    prompts             auto | chat | base
    temperature         decoding temperature for every stage but decomposition retries
    """

    name = "dtcrs"

    def __init__(
        self,
        window: int | None = None,
        chunk_tokens: int = 500,
        dim: int = clustering.DEFAULT_DIM,
        threshold: float = clustering.DEFAULT_THRESHOLD,
        max_layers: int = 5,
        max_cluster_tokens: int = 3500,
        summary_tokens: int = 0,
        max_context_tokens: int = 2000,
        top_k: int = 0,
        toc_input_tokens: int = 3000,
        min_subquestions: int = 2,
        max_subquestions: int = 5,
        decompose_retries: int = 2,
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
        if chunk_tokens < 1 or dim < 1:
            raise BadInput("dtcrs options chunk_tokens and dim must be >= 1")
        if not 1 <= min_subquestions <= max_subquestions:
            raise BadInput(
                f"dtcrs options: need 1 <= min_subquestions ({min_subquestions}) <= "
                f"max_subquestions ({max_subquestions})"
            )
        if not 0.0 <= threshold < 1.0:
            raise BadInput(f"dtcrs option threshold={threshold}: must be in [0, 1)")
        if context_order not in ("relevance", "document"):
            raise BadInput(f"dtcrs option context_order={context_order!r}")
        self.chunk_tokens = chunk_tokens
        self.dim = dim
        self.threshold = threshold
        self.max_layers = max_layers
        self.max_cluster_tokens = max_cluster_tokens
        self.summary_tokens = summary_tokens
        self.max_context_tokens = max_context_tokens
        self.top_k = top_k
        self.toc_input_tokens = toc_input_tokens
        self.min_subquestions = min_subquestions
        self.max_subquestions = max_subquestions
        self.decompose_retries = decompose_retries
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
            max_context_tokens=max_context_tokens,
            embedder=embedder,
            context_order=context_order,
            prompts=prompts,
            temperature=temperature,
        )
        self._tocs: dict[str, tuple[str, float]] = {}
        self._leaves: dict[str, Tree] = {}

    def _embedder(self):
        from chunkwise.embed import get_embedder

        return get_embedder(self.embedder)

    def _prompts(self, llm: LLM, family: str) -> Prompts:
        p = load_prompts("dtcrs", llm, family, self.prompts)
        if self.summary_tokens > 0:
            p.templates = {**p.templates, "summarize_max_new_tokens": self.summary_tokens}
        return p

    # -- stages --------------------------------------------------------------------------
    def table_of_contents(self, document: str, run: TreeRun, p: Prompts) -> tuple[str, bool]:
        """The document's table of contents (cached per document). Returns (toc, cached)."""
        window = self.effective_window(run.llm)
        key = document_key(document, run.llm.spec, p.kind, p.templates["version"], window)
        key += f":{self.toc_input_tokens}"
        if key in self._tocs:
            return self._tocs[key][0], True
        t0 = time.perf_counter()
        params = p.params("toc", self.temperature)
        template = run.prompt_tokens(p.render("toc", document=""))
        room = chunk_budget(window, template, 0, params.max_new_tokens)
        cap = min(self.toc_input_tokens, room) if self.toc_input_tokens > 0 else room
        excerpt = spread_excerpt(document, run.llm, cap)
        out = run.call("toc", [p.render("toc", document=excerpt)], params)[0]
        toc = (p.templates.get("toc_lead", "") + out.text).strip()
        self._tocs[key] = (toc, time.perf_counter() - t0)
        if len(self._tocs) > 16:
            self._tocs.pop(next(iter(self._tocs)))
        return toc, False

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
        best: list[str] = []
        for attempt in range(1 + max(0, self.decompose_retries)):
            params = p.params("decompose", self.temperature)
            if attempt:
                params = params.with_(temperature=0.7, seed=self.seed + attempt)
            out = run.call("decompose", [prompt], params)[0]
            subs = parse_subquestions(lead + out.text, self.max_subquestions)
            if len(subs) > len(best):
                best = subs
            if len(best) >= self.min_subquestions:
                return best, False
        q = query.question.strip()
        merged = [*best, q] if all(s.lower() != q.lower() for s in best) else best
        return merged[: max(self.max_subquestions, 1)], True

    def leaves(self, document: str, llm: LLM) -> tuple[Tree, bool]:
        """Chunks and their embeddings (cached per document; copied so a question's summary
        layers never leak into another's tree)."""
        key = document_key(document, self.chunk_tokens, self.embedder, llm.spec)
        base = self._leaves.get(key)
        cached = base is not None
        if base is None:
            base = leaf_tree(document, llm, self.chunk_tokens, self._embedder().encode)
            self._leaves[key] = base
            if len(self._leaves) > 8:
                self._leaves.pop(next(iter(self._leaves)))
        tree = Tree(list(base.nodes), base.embeddings.copy(), [list(base.layers[0])])
        return tree, cached

    def first_layer(
        self, tree: Tree, grower: LayerGrower, subquestions: list[str]
    ) -> tuple[list[list[int]], dict[str, Any]]:
        """Clusters of leaves guided by the sub-questions (global node ids)."""
        leaves = tree.layers[0]
        q_emb = self._embedder().encode(subquestions)
        grower.warm()
        layer = clustering.guided_clusters(
            tree.embeddings[leaves],
            q_emb,
            dim=self.dim,
            threshold=self.threshold,
            random_state=self.seed,
        )
        clusters = [[leaves[i] for i in c] for c in layer.clusters]
        if not self.global_clustering:  # hierarchical: each guided cluster split locally
            local: list[list[int]] = []
            for c in clusters:
                local.extend(grower.cluster(tree, c) if len(c) > self.dim + 1 else [c])
            clusters = local
        clusters = grower.fit_budget(tree, clusters)
        info = {
            "first_layer_components": layer.mixture.n_components,
            "first_layer_clusters": len(clusters),
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
            toc, cached = self.table_of_contents(document, run, p)
            extra.update(toc_cached=cached, toc_seconds=round(time.perf_counter() - t_toc, 3))

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

        tree, leaves_cached = self.leaves(document, llm)
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
        if len(tree.layers[0]) >= 2 and self.max_layers > 0:
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


__all__ = ["DTCRS", "SEPARATOR_TOKENS", "parse_subquestions", "parse_yes", "spread_excerpt"]
