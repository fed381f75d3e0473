"""Environment variables: chunkwise's cache folder (``CHUNKWISE_CACHE``), and variables set for
one block of code and put back afterwards."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def cache_root() -> Path:
    """Where chunkwise keeps what it builds once (converted models, merged adapters, digests):
    ``$CHUNKWISE_CACHE``, else ``~/.cache/chunkwise``."""
    return Path(os.environ.get("CHUNKWISE_CACHE", Path.home() / ".cache" / "chunkwise"))


@contextlib.contextmanager
def scoped_env(name: str, value: str | None) -> Iterator[None]:
    """``name=value`` in ``os.environ`` while the block runs, then the caller's value (or its
    absence) again; ``value=None`` leaves the environment as it is."""
    if value is None:
        yield
        return
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old


__all__ = ["scoped_env"]
