"""The offline MiniLM encoder (real model, loads in seconds), the registry, and BM25."""

from __future__ import annotations

import numpy as np
import pytest

from chunkwise.embed import BM25, HashingEmbedder, cosine, get_embedder
from chunkwise.embed import bm25 as bm25_mod
from chunkwise.errors import BadInput


@pytest.fixture(scope="module")
def minilm():
    return get_embedder("minilm")


@pytest.mark.slow
def test_minilm_encodes_normalized_384_dim_vectors(minilm):
    texts = [
        "The cat sat on the mat.",
        "A cat was sitting on a rug.",
        "Stock markets fell sharply today.",
    ]
    v = minilm.encode(texts)
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-4)
    s = minilm.similarity(v, v)
    assert s[0, 1] > 0.5 > s[0, 2]
    assert minilm.dim == 384


@pytest.mark.slow
def test_minilm_batches_match_single_calls_and_model_is_cached(minilm):
    texts = [f"Sentence number {i} about rivers and boats." for i in range(70)]
    batched = minilm.encode(texts)
    single = np.concatenate([minilm.encode([t]) for t in texts[:3]])
    assert np.allclose(batched[:3], single, atol=1e-5)
    assert get_embedder("minilm") is minilm and get_embedder("minilm").model is minilm.model
    assert minilm.encode([]).shape == (0, 384)
    assert minilm.encode(["", "  "]).shape == (2, 384)


@pytest.mark.slow
def test_minilm_offline_env_restored(minilm, monkeypatch):
    import os

    from chunkwise.embed.encoder import SentenceEncoder, default_model_path

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    enc = SentenceEncoder(default_model_path())  # a local path works too (cached per process)
    assert enc.encode(["hello"]).shape == (1, 384)
    assert "HF_HUB_OFFLINE" not in os.environ


def test_registry_names_and_errors(tmp_path):
    assert isinstance(get_embedder("hashing"), HashingEmbedder)
    assert get_embedder("hashing:64").dim == 64
    with pytest.raises(BadInput, match="unknown embedder"):
        get_embedder("no-such-embedder")


def test_hashing_embedder_is_deterministic_and_normalized():
    e = HashingEmbedder(256)
    a = e.encode(["the harbor master counts boats", "the harbor master counts boats", ""])
    assert np.allclose(a[0], a[1]) and np.allclose(np.linalg.norm(a[0]), 1.0)
    assert not a[2].any()
    assert np.allclose(cosine(a[:1], a[:1]), 1.0)


def test_bm25_ranks_matching_documents_first():
    docs = [
        "the harbor master counts boats",
        "bakers bake bread at dawn",
        "boats boats boats in the harbor",
    ]
    index = BM25(docs)
    s = index.scores("harbor boats")
    assert s[1] == 0 and s[0] > 0 and s[2] > 0
    assert index.top_k("bread", 1) == [1]
    m = bm25_mod.similarity(["bread", "harbor"], docs)
    assert m.shape == (2, 3) and m[0].argmax() == 1
    assert BM25([]).scores("x").shape == (0,)
