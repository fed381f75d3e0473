"""The dense-embedder protocol, the registry, and a model-free hashing encoder."""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from chunkwise.embed.vectors import cosine
from chunkwise.errors import BadInput


@runtime_checkable
class Embedder(Protocol):
    """Texts in, L2-normalized float32 rows out."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray: ...


_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbedder:
    """Bag of lower-cased words and word bigrams hashed into ``dim`` buckets (signed), with
    sublinear term frequency, L2-normalized. Deterministic across processes; no model."""

    def __init__(self, dim: int = 1024):
        self.dim = dim
        self.name = f"hashing-{dim}"

    def _bucket(self, feature: str) -> tuple[int, float]:
        h = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        return h % self.dim, (1.0 if (h >> 63) & 1 else -1.0)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = [w.lower() for w in _WORD.findall(text)]
            feats = words + [f"{a} {b}" for a, b in itertools.pairwise(words)]
            counts: dict[str, int] = {}
            for f in feats:
                counts[f] = counts.get(f, 0) + 1
            for f, n in counts.items():
                i, sign = self._bucket(f)
                out[row, i] += sign * (1.0 + np.log(n))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return cosine(a, b)


# name -> factory(argument after the colon, or "")
_REGISTRY: dict[str, Callable[[str], Embedder]] = {}
_INSTANCES: dict[str, Embedder] = {}
_LOCK = threading.Lock()


def register_embedder(name: str, factory: Callable[[str], Embedder]) -> None:
    _REGISTRY[name] = factory


def _sentence_transformer(arg: str) -> Embedder:
    from chunkwise.embed.encoder import SentenceEncoder

    return SentenceEncoder(arg or None)


def _truncating(arg: str) -> Embedder:
    from chunkwise.embed.encoder import SentenceEncoder

    return SentenceEncoder(arg or None, windowed=False)


register_embedder("minilm", _sentence_transformer)
register_embedder("minilm-truncated", _truncating)
register_embedder("default", _sentence_transformer)
register_embedder("st", _sentence_transformer)
register_embedder("hashing", lambda arg: HashingEmbedder(int(arg) if arg else 1024))


def get_embedder(name: str = "minilm") -> Embedder:
    """An embedder by name, built once per process and shared (encoders are thread-safe).

    ``minilm``/``default`` (the offline all-MiniLM-L6-v2), ``st:PATH`` or a bare local folder
    (any sentence-transformers model), ``hashing`` or ``hashing:DIM``. Sentence-transformers
    encoders embed texts longer than the model reads by windows, pooled
    (:mod:`chunkwise.embed.encoder`); ``minilm-truncated`` (or ``minilm-truncated:PATH``)
    cuts them instead, as sentence-transformers does on its own.
    """
    key = name.strip()
    with _LOCK:
        if key in _INSTANCES:
            return _INSTANCES[key]
        base, _, arg = key.partition(":")
        if base in _REGISTRY:
            emb = _REGISTRY[base](arg)
        elif Path(key).expanduser().is_dir():
            emb = _sentence_transformer(key)
        else:
            raise BadInput(
                f"unknown embedder {name!r}; valid: {', '.join(sorted(_REGISTRY))}, st:PATH, "
                "or a local sentence-transformers folder"
            )
        _INSTANCES[key] = emb
        return emb
