"""What retrieval, RAPTOR and DTCRS check and choose the same way: option values (one
validator, one message shape) and the dense embedder (any :func:`chunkwise.embed.get_embedder`
name: ``minilm``, ``hashing``, ``st:PATH`` or a local sentence-transformers folder)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chunkwise.embed import Embedder
from chunkwise.errors import BadInput
from chunkwise.strategies.base import Strategy


def check_option(
    strategy: str,
    name: str,
    value: Any,
    *,
    minimum: float | None = None,
    choices: Sequence[Any] | None = None,
    fraction: bool = False,
) -> None:
    """Raise :class:`BadInput` ``"<strategy> option <name>=<value>: <rule>"`` unless ``value``
    is ``>= minimum``, one of ``choices``, or (``fraction``) in ``[0, 1)``."""
    if choices is not None and value not in choices:
        valid = ", ".join(str(c) for c in choices)
        raise BadInput(f"{strategy} option {name}={value!r}; valid: {valid}")
    if minimum is not None and value < minimum:
        raise BadInput(f"{strategy} option {name}={value!r}: must be >= {minimum:g}")
    if fraction and not 0.0 <= value < 1.0:
        raise BadInput(f"{strategy} option {name}={value!r}: must be in [0, 1)")


class EmbeddingStrategy(Strategy):
    """A strategy that embeds text with the encoder named by its ``embedder`` option."""

    embedder: str = "minilm"

    def _embedder(self) -> Embedder:
        from chunkwise.embed import get_embedder

        return get_embedder(self.embedder)
