"""DPR-style retrieval: embed sentence-packed chunks, read the most similar under a token
budget, answer once.

The baseline of the RAPTOR and DTCRS papers, and DTCRS's route for questions its
classifier judges simple. Chunks and their embeddings are cached per document, so further
questions on the same document only embed the question.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from chunkwise.errors import BadInput
from chunkwise.llm import LLM
from chunkwise.strategies.base import Answer, Query, Stats, Strategy, TraceEvent, register
from chunkwise.strategies.tree import (
    Node,
    TreeRun,
    answer_from_context,
    build_context,
    collapsed_select,
    context_budget,
    document_key,
    load_prompts,
    query_text,
    sentence_chunks,
    timed,
)


@dataclass
class _Index:
    nodes: list[Node]
    embeddings: np.ndarray
    seconds: float


@register
class Retrieval(Strategy):
    """Options (``--strategy-args k=v``):

    chunk_tokens        chunk size in the model's tokens, whole sentences (100)
    top_k               most chunks read (20; 0 = only the token budget limits)
    max_context_tokens  token budget of the retrieved text (2000, RAPTOR's setting; never
                        more than fits the window)
    embedder            dense encoder name for chunkwise.embed (minilm)
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
        if chunk_tokens < 1:
            raise BadInput(f"retrieval option chunk_tokens={chunk_tokens}: must be >= 1")
        if top_k < 0 or max_context_tokens < 0:
            raise BadInput("retrieval options top_k and max_context_tokens must be >= 0")
        if context_order not in ("relevance", "document"):
            raise BadInput(f"retrieval option context_order={context_order!r}")
        self.chunk_tokens = chunk_tokens
        self.top_k = top_k
        self.max_context_tokens = max_context_tokens
        self.embedder = embedder
        self.context_order = context_order
        self.prompts = prompts
        self.temperature = temperature
        self._index: dict[str, _Index] = {}

    def _embedder(self):
        from chunkwise.embed import get_embedder

        return get_embedder(self.embedder)

    def index(self, document: str, llm: LLM) -> tuple[_Index, bool]:
        """Chunks and embeddings of ``document`` (cached per document). Returns (index, cached)."""
        key = document_key(document, self.chunk_tokens, self.embedder, llm.spec)
        if key in self._index:
            return self._index[key], True

        def build() -> tuple[list[Node], np.ndarray]:
            pieces = sentence_chunks(document, llm, self.chunk_tokens)
            nodes = [Node(i, t, 0, n) for i, (t, n) in enumerate(pieces)]
            emb = self._embedder().encode([n.text for n in nodes])
            return nodes, emb

        (nodes, emb), seconds = timed(build)
        idx = _Index(nodes, emb, seconds)
        self._index = {key: idx, **dict(list(self._index.items())[:7])}
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
        budget = context_budget(
            run, prompts, query, self.effective_window(llm), self.max_context_tokens
        )
        emb = self._embedder()
        q = emb.encode([query_text(query)])
        sims = emb.similarity(q, idx.embeddings)[0] if len(idx.nodes) else np.zeros(0)
        picked = collapsed_select(sims, [n.tokens for n in idx.nodes], budget, self.top_k)
        ctx = build_context(idx.nodes, picked, self.context_order)
        text = answer_from_context(run, prompts, query, ctx, self.temperature)
        index_seconds = round(0.0 if cached else idx.seconds, 3)
        stats.extra.setdefault("summary_nodes", 0)
        stats.extra.setdefault("build_seconds", index_seconds)
        stats.extra.update(
            chunks=len(idx.nodes),
            index_seconds=index_seconds,
            index_cached=cached,
            retrieved=len(picked),
            context_tokens=ctx.tokens,
            context_budget=budget,
            retrieval_prompt_kind=prompts.kind,
            prompt_version=prompts.templates["version"],
        )
        return Answer(text, trace, stats)
