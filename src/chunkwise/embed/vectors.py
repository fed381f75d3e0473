"""Vector arithmetic the embedders and their users share (no model, no registry: the bottom
of the embed layer, so that the registry and the encoders both import it)."""

from __future__ import annotations

import numpy as np


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity matrix of two sets of row vectors (normalized here, zero rows → 0)."""
    a = np.atleast_2d(np.asarray(a, dtype=np.float32))
    b = np.atleast_2d(np.asarray(b, dtype=np.float32))
    an = np.linalg.norm(a, axis=1, keepdims=True)
    bn = np.linalg.norm(b, axis=1, keepdims=True)
    a = np.divide(a, an, out=np.zeros_like(a), where=an > 0)
    b = np.divide(b, bn, out=np.zeros_like(b), where=bn > 0)
    return a @ b.T


__all__ = ["cosine"]
