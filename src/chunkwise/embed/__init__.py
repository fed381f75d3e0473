"""Sentence embeddings and lexical scoring, shared by synthesis, chains and summary trees.

Dense encoders follow one small protocol (:class:`Embedder`)::

    emb = get_embedder("minilm")          # offline all-MiniLM-L6-v2, 384-dim, CPU
    vecs = emb.encode(["a sentence", "another"])   # (n, dim) float32, L2-normalized
    sims = emb.similarity(vecs, vecs)              # cosine similarity matrix

Names: ``minilm`` (alias ``default``), any local sentence-transformers folder, ``st:PATH``, and
``hashing`` (a model-free bag-of-words hashing encoder, for tests and as a cheap fallback).
Texts longer than a sentence-transformers model reads (256 word-pieces for MiniLM) are
embedded by non-overlapping windows, pooled by a token-weighted mean (``minilm-truncated``
cuts them instead).
BM25 is lexical and asymmetric (query vs. documents), so it is its own class:
:class:`chunkwise.embed.bm25.BM25`.
"""

from chunkwise.embed.base import Embedder, HashingEmbedder, cosine, get_embedder, register_embedder
from chunkwise.embed.bm25 import BM25, tokenize

__all__ = [
    "BM25",
    "Embedder",
    "HashingEmbedder",
    "cosine",
    "get_embedder",
    "register_embedder",
    "tokenize",
]
