"""The demo's error: a stage could not finish."""

from __future__ import annotations

from chunkwise.errors import ChunkwiseError


class DemoError(ChunkwiseError):
    """A stage could not finish; the message says which and where its log is."""


__all__ = ["DemoError"]
