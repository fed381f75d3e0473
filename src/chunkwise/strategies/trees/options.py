"""What retrieval, RAPTOR and DTCRS choose the same way: the dense embedder (any
:func:`chunkwise.embed.get_embedder` name: ``minilm``, ``hashing``, ``st:PATH`` or a local
sentence-transformers folder). Their option values are checked by
:func:`chunkwise.strategies.base.check_option`."""

from __future__ import annotations

from chunkwise.embed import Embedder
from chunkwise.strategies.base import Strategy

__all__ = ["EmbeddingStrategy"]


class EmbeddingStrategy(Strategy):
    """A strategy that embeds text with the encoder named by its ``embedder`` option."""

    embedder: str = "minilm"

    def _embedder(self) -> Embedder:
        from chunkwise.embed import get_embedder

        return get_embedder(self.embedder)
