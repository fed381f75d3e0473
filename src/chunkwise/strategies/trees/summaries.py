"""Summarising clusters of tree nodes into the next layer (one wave of LLM calls)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from chunkwise.strategies.trees.calls import Prompts, TreeRun
from chunkwise.strategies.trees.leaves import squash
from chunkwise.strategies.trees.nodes import Node, Tree
from chunkwise.text import chunk_budget, middle_truncate
from chunkwise.text.tokens import count_many


def cluster_text(nodes: Sequence[Node], separator: str = "\n\n") -> str:
    """The members of a cluster as the summarizer reads them (one paragraph each)."""
    return separator.join(squash(n.text) for n in nodes)


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
        s = squash(out.text)
        if not s:
            empty += 1
            s, _ = middle_truncate(text, run.llm, params.max_new_tokens)
            s = squash(s)
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
