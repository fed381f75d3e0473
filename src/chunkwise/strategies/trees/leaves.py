"""Leaves: whole sentences packed into chunks of the model's tokens, and cache keys."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import numpy as np

from chunkwise.errors import BadInput
from chunkwise.strategies.trees.nodes import Node, Tree
from chunkwise.text import chunk_document
from chunkwise.text.sentences import sentence_spans
from chunkwise.text.tokens import TokenCounter, count_many


def squash(text: str) -> str:
    """Whitespace runs collapsed to single spaces."""
    return " ".join(text.split())


def sentence_chunks(text: str, counter: TokenCounter, max_tokens: int) -> list[tuple[str, int]]:
    """``(chunk text, tokens)`` pairs: whole sentences packed greedily under ``max_tokens``.

    Whitespace inside a sentence is collapsed to single spaces (hard-wrapped lines and
    layout runs would otherwise cost tokens); sentences in a chunk are joined by one space.
    A sentence longer than the budget is cut by :func:`chunk_document` on its own.
    """
    if max_tokens < 1:
        raise BadInput(f"chunk size must be at least 1 token, got {max_tokens}")
    sentences = [squash(text[s:e]) for s, e in sentence_spans(text)]
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


def leaf_tree(
    document: str,
    counter: TokenCounter,
    chunk_tokens: int,
    embed: Callable[[list[str]], np.ndarray],
) -> Tree:
    """A tree of leaves only: the document's sentence chunks and their embeddings."""
    pieces = sentence_chunks(document, counter, chunk_tokens)
    nodes = [Node(i, t, 0, n) for i, (t, n) in enumerate(pieces)]
    emb = embed([n.text for n in nodes]) if nodes else np.zeros((0, 1), dtype=np.float32)
    return Tree(nodes, np.asarray(emb, dtype=np.float32), [[n.index for n in nodes]])
