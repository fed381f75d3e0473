"""What retrieval, RAPTOR and DTCRS share: sentence-packed leaves, the summary tree, its
retrieval (collapsed or traversal), LLM calls counted by kind, and the answer step.

* :func:`sentence_chunks` packs whole sentences into chunks of at most N tokens of the
  model's tokenizer (a sentence that alone exceeds N is cut by the budgeted chunker).
* :class:`Tree` holds the nodes (leaves at layer 0, summaries above) and their embeddings,
  and serialises to JSON so a document's tree can be cached on disk.
* :func:`collapsed_select` ranks every node by cosine similarity to the query and keeps
  nodes while they fit a token budget; a node that would overflow is *skipped* and the scan
  goes on (the RAPTOR paper's Algorithm 2; its code stops at the first overflow instead).
* :func:`traverse_select` walks from the top layer down, keeping the ``top_k`` most similar
  children of the nodes kept one layer up.
* :class:`TreeRun` is one question's bookkeeping: LLM calls by kind (toc, classify,
  decompose, summarize, answer), the trace, summaries of clusters, and the answer call.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise.errors import BadInput
from chunkwise.io import atomic_write_text
from chunkwise.llm import LLM, Completion, GenerationParams, Request
from chunkwise.prompts import prompt_set
from chunkwise.strategies.base import Query, Stats, Strategy, TraceEvent
from chunkwise.text import chunk_budget, chunk_document, middle_truncate
from chunkwise.text.sentences import sentence_spans
from chunkwise.text.tokens import TokenCounter, count_many

CALL_KINDS = ("toc", "classify", "decompose", "summarize", "answer")
TREE_FORMAT = 1


# --------------------------------------------------------------------------------------------
# leaves


def _squash(text: str) -> str:
    return " ".join(text.split())


def sentence_chunks(text: str, counter: TokenCounter, max_tokens: int) -> list[tuple[str, int]]:
    """``(chunk text, tokens)`` pairs: whole sentences packed greedily under ``max_tokens``.

    Whitespace inside a sentence is collapsed to single spaces (hard-wrapped lines and
    layout runs would otherwise cost tokens); sentences in a chunk are joined by one space.
    A sentence longer than the budget is cut by :func:`chunk_document` on its own.
    """
    if max_tokens < 1:
        raise BadInput(f"chunk size must be at least 1 token, got {max_tokens}")
    sentences = [_squash(text[s:e]) for s, e in sentence_spans(text)]
    sentences = [s for s in sentences if s]
    if not sentences:
        return []
    sizes = count_many(counter, sentences)
    pieces: list[tuple[str, int]] = []
    for sent, n in zip(sentences, sizes, strict=True):
        if n <= max_tokens:
            pieces.append((sent, n))
        else:
            pieces.extend((c.text, c.tokens) for c in chunk_document(sent, counter, max_tokens))
    chunks: list[list[str]] = []
    used = 0
    for sent, n in pieces:
        # +1: the joining space may cost a token at the seam
        if chunks and used + 1 + n <= max_tokens:
            chunks[-1].append(sent)
            used += 1 + n
        else:
            chunks.append([sent])
            used = n
    texts = [" ".join(c) for c in chunks]
    counts = count_many(counter, texts)
    out = []
    for t, n in zip(texts, counts, strict=True):
        if n > max_tokens:  # the seams merged differently: cut again, exactly
            out.extend((c.text, c.tokens) for c in chunk_document(t, counter, max_tokens))
        else:
            out.append((t, n))
    return out


def document_key(document: str, *parts: object) -> str:
    """A cache key: the document's SHA-256 together with whatever settings shape the tree."""
    h = hashlib.sha256(document.encode("utf-8"))
    for p in parts:
        h.update(b"\x00" + str(p).encode("utf-8"))
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# the tree


@dataclass
class Node:
    index: int
    text: str
    layer: int
    tokens: int
    children: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "text": self.text,
            "layer": self.layer,
            "tokens": self.tokens,
            "children": list(self.children),
        }


@dataclass
class Tree:
    """Nodes (leaves first), one embedding row per node, node ids per layer, build record."""

    nodes: list[Node]
    embeddings: np.ndarray
    layers: list[list[int]]
    build: dict[str, Any] = field(default_factory=dict)

    @property
    def summary_nodes(self) -> int:
        return sum(1 for n in self.nodes if n.layer > 0)

    def add_layer(self, nodes: list[Node], embeddings: np.ndarray) -> None:
        self.nodes.extend(nodes)
        self.embeddings = (
            np.concatenate([self.embeddings, embeddings], axis=0) if len(nodes) else self.embeddings
        )
        self.layers.append([n.index for n in nodes])

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": TREE_FORMAT,
                "nodes": [n.to_dict() for n in self.nodes],
                "embeddings": np.asarray(self.embeddings, dtype=np.float32).tolist(),
                "layers": self.layers,
                "build": self.build,
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> Tree:
        data = json.loads(text)
        if data.get("format") != TREE_FORMAT:
            raise BadInput(f"tree cache format {data.get('format')!r}, expected {TREE_FORMAT}")
        nodes = [
            Node(d["index"], d["text"], d["layer"], d["tokens"], tuple(d["children"]))
            for d in data["nodes"]
        ]
        emb = np.asarray(data["embeddings"], dtype=np.float32).reshape(len(nodes), -1)
        return cls(nodes, emb, [list(x) for x in data["layers"]], dict(data.get("build", {})))


class TreeCache:
    """Trees by key: in memory (a bounded LRU) and, when ``folder`` is set, as JSON files."""

    def __init__(self, folder: str | Path | None = None, keep: int = 8):
        self.folder = Path(folder).expanduser() if folder else None
        self.keep = keep
        self._mem: dict[str, Tree] = {}

    def get(self, key: str) -> Tree | None:
        if key in self._mem:
            tree = self._mem.pop(key)
            self._mem[key] = tree
            return tree
        if self.folder is not None:
            path = self.folder / f"{key}.json"
            if path.is_file():
                tree = Tree.from_json(path.read_text(encoding="utf-8"))
                self._remember(key, tree)
                return tree
        return None

    def put(self, key: str, tree: Tree) -> None:
        self._remember(key, tree)
        if self.folder is not None:
            atomic_write_text(self.folder / f"{key}.json", tree.to_json())

    def _remember(self, key: str, tree: Tree) -> None:
        self._mem[key] = tree
        while len(self._mem) > self.keep:
            self._mem.pop(next(iter(self._mem)))


# --------------------------------------------------------------------------------------------
# retrieval


def collapsed_select(
    similarities: Sequence[float],
    sizes: Sequence[int],
    budget: int,
    top_k: int = 0,
) -> list[int]:
    """Indices of the nodes to read, most similar first, under a token budget.

    Nodes are scanned from the most to the least similar; one that would take the total
    over ``budget`` is skipped and the scan continues, so smaller nodes further down can
    still fill the remaining room. ``top_k`` > 0 also caps the number of nodes kept.
    """
    order = np.argsort(-np.asarray(similarities, dtype=np.float64), kind="stable")
    picked: list[int] = []
    used = 0
    for i in order:
        n = int(sizes[i])
        if used + n > budget:
            continue
        picked.append(int(i))
        used += n
        if top_k and len(picked) >= top_k:
            break
    return picked


def traverse_select(
    tree: Tree, similarities: np.ndarray, top_k: int, sizes: Sequence[int], budget: int
) -> list[int]:
    """RAPTOR's tree traversal: the ``top_k`` most similar nodes of the top layer, then the
    ``top_k`` most similar among their children, down to the leaves; the nodes kept, in that
    order, are then fitted to the budget (skip and continue)."""
    sims = np.asarray(similarities, dtype=np.float64)
    layer = list(tree.layers[-1])
    kept: list[int] = []
    while layer:
        best = sorted(layer, key=lambda i: -sims[i])[:top_k]
        kept.extend(best)
        layer = sorted({c for i in best for c in tree.nodes[i].children})
    out, used = [], 0
    for i in kept:
        if used + sizes[i] <= budget:
            out.append(i)
            used += sizes[i]
    return out


# --------------------------------------------------------------------------------------------
# one question's bookkeeping


def _line_clean(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()


@dataclass
class Prompts:
    kind: str
    templates: dict[str, Any]

    def render(self, name: str, **values: str) -> str:
        values.setdefault("answer_prefix", "Answer:")
        return _line_clean(self.templates[name].format(**values))

    def params(self, stage: str, temperature: float = 0.0, **changes: Any) -> GenerationParams:
        p = GenerationParams(
            max_new_tokens=int(self.templates[f"{stage}_max_new_tokens"]),
            temperature=temperature,
            stop=tuple(self.templates.get(f"{stage}_stop", [])),
        )
        return p.with_(**changes) if changes else p


def load_prompts(strategy: str, llm: LLM, family: str, kind: str = "auto") -> Prompts:
    kind = kind if kind != "auto" else ("chat" if llm.chat else "base")
    if kind not in ("chat", "base"):
        raise BadInput(f"prompts={kind!r}; valid: auto, chat, base")
    return Prompts(kind, prompt_set(strategy, kind, family))


class TreeRun:
    """LLM calls of one question, counted by kind, with their trace events."""

    def __init__(self, llm: LLM, stats: Stats, trace: list[TraceEvent]):
        self.llm = llm
        self.stats = stats
        self.trace = trace
        kinds = stats.extra.setdefault("llm_calls_by_kind", {})
        for k in CALL_KINDS:
            kinds.setdefault(k, 0)
        self.by_kind: dict[str, int] = kinds
        self.tokens_by_kind: dict[str, int] = stats.extra.setdefault("tokens_by_kind", {})

    def request(self, text: str, params: GenerationParams) -> Request:
        return Request(self.llm.as_prompt(text), params)

    def call(
        self,
        kind: str,
        prompts: Sequence[str],
        params: GenerationParams,
        inputs: Sequence[list[Any]] | None = None,
        layer: int = 0,
    ) -> list[Completion]:
        """One wave of calls of one kind; every call is counted and traced."""
        if not prompts:
            return []
        outs = Strategy.call(self.llm, [self.request(p, params) for p in prompts], self.stats)
        self.by_kind[kind] = self.by_kind.get(kind, 0) + len(outs)
        self.tokens_by_kind[kind] = self.tokens_by_kind.get(kind, 0) + sum(
            o.prompt_tokens + o.completion_tokens for o in outs
        )
        for i, out in enumerate(outs):
            self.trace.append(
                TraceEvent(
                    kind,
                    list(inputs[i]) if inputs is not None else [],
                    {"raw": out.text},
                    out.prompt_tokens,
                    out.completion_tokens,
                    out.latency_s,
                    layer,
                )
            )
        return outs

    def prompt_tokens(self, text: str) -> int:
        return self.llm.prompt_tokens(self.llm.as_prompt(text))


# --------------------------------------------------------------------------------------------
# summaries


def cluster_text(nodes: Sequence[Node], separator: str = "\n\n") -> str:
    """The members of a cluster as the summarizer reads them (one paragraph each)."""
    return separator.join(_squash(n.text) for n in nodes)


def summary_input_budget(run: TreeRun, prompts: Prompts, window: int, cap: int) -> int:
    """Tokens of cluster text one summary call may read: the smaller of ``cap`` and what
    fits the window next to the template and the summary's own length."""
    template = run.prompt_tokens(prompts.render("summarize", text=""))
    fits = chunk_budget(window, template, 0, int(prompts.templates["summarize_max_new_tokens"]))
    return min(cap, fits) if cap > 0 else fits


def summarize_clusters(
    run: TreeRun,
    prompts: Prompts,
    tree: Tree,
    clusters: Sequence[Sequence[int]],
    layer: int,
    input_budget: int,
    embed: Callable[[list[str]], np.ndarray],
    temperature: float = 0.0,
) -> list[Node]:
    """Summarize every cluster in one wave, embed the summaries and add them as a layer.

    A cluster whose text exceeds ``input_budget`` (only a single over-long member can, after
    re-clustering) is cut in the middle. An empty summary falls back to the start of the
    cluster's text, so the node still says something (counted in ``empty_summaries``).
    """
    texts = []
    for members in clusters:
        text = cluster_text([tree.nodes[i] for i in members])
        text, _ = middle_truncate(text, run.llm, input_budget)
        texts.append(text)
    params = prompts.params("summarize", temperature)
    outs = run.call(
        "summarize",
        [prompts.render("summarize", text=t) for t in texts],
        params,
        inputs=[list(c) for c in clusters],
        layer=layer,
    )
    summaries = []
    empty = 0
    for out, text in zip(outs, texts, strict=True):
        s = _squash(out.text)
        if not s:
            empty += 1
            s, _ = middle_truncate(text, run.llm, params.max_new_tokens)
            s = _squash(s)
        summaries.append(s)
    if empty:
        run.stats.extra["empty_summaries"] = run.stats.extra.get("empty_summaries", 0) + empty
    counts = count_many(run.llm, summaries)
    first = len(tree.nodes)
    nodes = [
        Node(first + k, s, layer, n, tuple(sorted(c)))
        for k, (s, n, c) in enumerate(zip(summaries, counts, clusters, strict=True))
    ]
    tree.add_layer(nodes, embed(summaries) if nodes else np.zeros((0, tree.embeddings.shape[1])))
    return nodes


# --------------------------------------------------------------------------------------------
# the answer


def query_text(query: Query) -> str:
    """What is embedded for retrieval: the question and, for multiple choice, its options."""
    return " ".join([query.question.strip(), *[o.strip() for o in query.options]])


@dataclass
class Context:
    node_ids: list[int]
    text: str
    tokens: int


def build_context(
    nodes: Sequence[Node], picked: Sequence[int], order: str, separator: str = "\n\n"
) -> Context:
    """The retrieved nodes as one text: in retrieval order (most similar first), or with
    ``order="document"`` leaves in document order after summaries from the top layer down."""
    ids = list(picked)
    if order == "document":
        ids = sorted(ids, key=lambda i: (-nodes[i].layer, i))
    elif order != "relevance":
        raise BadInput(f"context order {order!r}; valid: relevance, document")
    text = separator.join(_squash(nodes[i].text) for i in ids)
    return Context(ids, text, sum(nodes[i].tokens for i in ids))


def context_budget(run: TreeRun, prompts: Prompts, query: Query, window: int, cap: int) -> int:
    """Tokens of retrieved text the answer call may read: ``cap`` or what fits the window."""
    params = answer_params(prompts, query)
    template = run.prompt_tokens(
        prompts.render(
            "answer",
            context="",
            question=query.render(),
            answer_prefix=query.answer_prefix or "Answer:",
        )
    )
    fits = chunk_budget(window, template, 0, params.max_new_tokens)
    return min(cap, fits) if cap > 0 else fits


def answer_params(prompts: Prompts, query: Query, temperature: float = 0.0) -> GenerationParams:
    p = prompts.params("answer", temperature)
    if query.max_answer_tokens:
        p = p.with_(max_new_tokens=max(p.max_new_tokens, query.max_answer_tokens))
    return p


def answer_from_context(
    run: TreeRun, prompts: Prompts, query: Query, context: Context, temperature: float = 0.0
) -> str:
    prompt = prompts.render(
        "answer",
        context=context.text,
        question=query.render(),
        answer_prefix=query.answer_prefix or "Answer:",
    )
    out = run.call(
        "answer", [prompt], answer_params(prompts, query, temperature), [context.node_ids]
    )[0]
    return out.text.strip()


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


__all__ = [
    "CALL_KINDS",
    "Context",
    "Node",
    "Prompts",
    "Tree",
    "TreeCache",
    "TreeRun",
    "answer_from_context",
    "build_context",
    "cluster_text",
    "collapsed_select",
    "context_budget",
    "document_key",
    "load_prompts",
    "query_text",
    "sentence_chunks",
    "summarize_clusters",
    "summary_input_budget",
    "timed",
    "traverse_select",
]
