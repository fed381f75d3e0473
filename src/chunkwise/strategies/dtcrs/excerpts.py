"""What DTCRS's table of contents is written from, when the document does not fit the call:
its head (the reference) or evenly spaced runs of whole sentences (``toc_input=spread``)."""

from __future__ import annotations

import numpy as np

from chunkwise.llm import LLM
from chunkwise.strategies.trees.leaves import sentence_chunks

#: the ``toc_input`` choices
TOC_INPUTS = ("head", "spread")


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


__all__ = ["TOC_INPUTS", "head_excerpt", "spread_excerpt"]
