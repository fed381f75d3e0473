"""One bounded cache for every per-document artifact (trees, tables of contents, leaf
embeddings, retrieval indexes): least-recently-used eviction, the same rule everywhere."""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path
from typing import Generic, TypeVar

from chunkwise.io import atomic_write_text
from chunkwise.strategies.trees.nodes import Tree

V = TypeVar("V")


class LRU(Generic[V]):
    """At most ``keep`` values; a hit makes its key the most recent; the least recent goes
    first when a new key would exceed ``keep``."""

    def __init__(self, keep: int = 8):
        if keep < 1:
            raise ValueError(f"cache size must be >= 1, got {keep}")
        self.keep = keep
        self._items: OrderedDict[str, V] = OrderedDict()

    def get(self, key: str) -> V | None:
        if key not in self._items:
            return None
        self._items.move_to_end(key)
        return self._items[key]

    def put(self, key: str, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.keep:
            self._items.popitem(last=False)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> list[str]:
        """Keys from the least to the most recently used."""
        return list(self._items)

    def values(self) -> list[V]:
        """Values from the least to the most recently used (recency unchanged)."""
        return list(self._items.values())


class TreeCache:
    """Trees by key: in memory (an :class:`LRU`) and, when ``folder`` is set, as JSON files."""

    def __init__(self, folder: str | Path | None = None, keep: int = 8):
        self.folder = Path(folder).expanduser() if folder else None
        self.memory: LRU[Tree] = LRU(keep)

    def get(self, key: str) -> Tree | None:
        tree = self.memory.get(key)
        if tree is not None:
            return tree
        if self.folder is not None:
            path = self.folder / f"{key}.json"
            if path.is_file():
                tree = Tree.from_json(path.read_bytes(), str(path))
                self.memory.put(key, tree)
                return tree
        return None

    def put(self, key: str, tree: Tree) -> None:
        self.memory.put(key, tree)
        if self.folder is not None:
            atomic_write_text(self.folder / f"{key}.json", tree.to_json())
