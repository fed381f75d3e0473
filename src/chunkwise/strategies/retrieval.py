"""DPR-style retrieval: embed sentence-packed chunks, read the most similar under a token
budget, answer once.

The baseline of the RAPTOR and DTCRS papers, and DTCRS's route for questions its
classifier judges simple. Chunks and their embeddings are cached per document, so further
questions on the same document only embed the question.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from chunkwise.llm import LLM
from chunkwise.strategies.base import Answer, Query, Stats, TraceEvent, register
from chunkwise.strategies.tree import (
    CONTEXT_ORDERS,
    LRU,
    EmbeddingStrategy,
    Tree,
    TreeRun,
    answer_from_context,
    build_context,
    check_option,
    collapsed_select,
    context_budget,
    document_key,
    leaf_tree,
    load_prompts,
    query_text,
    timed,
)


@dataclass
class _Index:
    tree: Tree
    seconds: float


@register
class Retrieval(EmbeddingStrategy):
    """Options (``--strategy-args k=v``):

    chunk_tokens        chunk size in the model's tokens, whole sentences (100)
    top_k               most chunks read (20; 0 = only the token budget limits)
    max_context_tokens  token budget of the retrieved text (2000, RAPTOR's setting; never
                        more than fits the window)
    embedder            dense encoder for chunkwise.embed: minilm, hashing, st:PATH or a
                        local sentence-transformers folder (long chunks embedded by windows)
    context_order       relevance (most similar first) | document
    prompts             auto | chat | base
    temperature         answer decoding temperature
    """

    name = "retrieval"

    def __init__(
        self,
        window: int | None = None,
        chunk_tokens: int = 100,
        top_k: int = 20,
        max_context_tokens: int = 2000,
        embedder: str = "minilm",
        context_order: str = "relevance",
        prompts: str = "auto",
        temperature: float = 0.0,
    ):
        super().__init__(window)
        check_option("retrieval", "chunk_tokens", chunk_tokens, minimum=1)
        check_option("retrieval", "top_k", top_k, minimum=0)
        check_option("retrieval", "max_context_tokens", max_context_tokens, minimum=0)
        check_option("retrieval", "context_order", context_order, choices=CONTEXT_ORDERS)
        self.chunk_tokens = chunk_tokens
        self.top_k = top_k
        self.max_context_tokens = max_context_tokens
        self.embedder = embedder
        self.context_order = context_order
        self.prompts = prompts
        self.temperature = temperature
        self._index: LRU[_Index] = LRU(8)

    def index(self, document: str, llm: LLM) -> tuple[_Index, bool]:
        """Chunks and embeddings of ``document`` (cached per document). Returns (index, cached)."""
        key = document_key(document, self.chunk_tokens, self.embedder, llm.spec)
        idx = self._index.get(key)
        if idx is not None:
            return idx, True
        tree, seconds = timed(
            lambda: leaf_tree(document, llm, self.chunk_tokens, self._embedder().encode)
        )
        idx = _Index(tree, seconds)
        self._index.put(key, idx)
        return idx, False

    def run(self, document: str, query: Query, llm: LLM) -> Answer:
        stats = Stats()
        trace: list[TraceEvent] = []
        return self.answer_into(document, query, llm, stats, trace)

    def answer_into(
        self, document: str, query: Query, llm: LLM, stats: Stats, trace: list[TraceEvent]
    ) -> Answer:
        """Answer with ``stats`` and ``trace`` already begun (DTCRS routes simple questions
        here and keeps its own counts)."""
        run = TreeRun(llm, stats, trace)
        prompts = load_prompts("retrieval", llm, query.task, self.prompts)
        idx, cached = self.index(document, llm)
        nodes = idx.tree.nodes
        budget = context_budget(
            run, prompts, query, self.effective_window(llm), self.max_context_tokens
        )
        emb = self._embedder()
        q = emb.encode([query_text(query)])
        sims = emb.similarity(q, idx.tree.embeddings)[0] if nodes else np.zeros(0)
        picked = collapsed_select(sims, [n.tokens for n in nodes], budget, self.top_k)
        ctx = build_context(nodes, picked, self.context_order)
        text = answer_from_context(run, prompts, query, ctx, self.temperature)
        index_seconds = round(0.0 if cached else idx.seconds, 3)
        extra = stats.extra
        extra.setdefault("summary_nodes", 0)
        extra.setdefault("build_seconds", index_seconds)
        # per-document work this question did not pay again (bench/trees.py adds it back
        # for its "as if nothing were cached" view)
        extra["reused_seconds"] = round(
            extra.get("reused_seconds", 0.0) + (idx.seconds if cached else 0.0), 3
        )
        extra.setdefault("reused_summary_calls", 0)
        extra.update(
            chunks=len(nodes),
            index_seconds=index_seconds,
            index_cached=cached,
            retrieved=len(picked),
            context_tokens=ctx.tokens,
            context_budget=budget,
            retrieval_prompt_kind=prompts.kind,
            prompt_version=prompts.templates["version"],
        )
        return Answer(text, trace, stats)
