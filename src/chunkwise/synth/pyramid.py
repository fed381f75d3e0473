"""The document pyramid as data: leaves are chunks of the document, each parent summarizes
consecutive nodes, up to one root. Nodes keep their sentences' importance, the leaves and the
span of the document they cover, and read back from the JSON the build writes.

Levels: a leaf has level 0; a parent is one above its highest child; the root's level + 1 is
the pyramid's number of ``levels`` (1 for a document that fits in one chunk — a one-leaf
pyramid whose root is its leaf). :mod:`chunkwise.synth.pyramid_builder` builds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chunkwise.synth import importance as imp


class PyramidError(Exception):
    """A document for which no pyramid could be built (the reason is ``args[0]``)."""


@dataclass
class Sentence:
    start: int  # character span within the node's text
    end: int
    importance: float = 0.0


@dataclass
class Node:
    id: str
    level: int
    text: str
    children: list[str] = field(default_factory=list)
    leaves: tuple[int, int] = (0, 0)  # first and last leaf index covered
    char_span: tuple[int, int] = (0, 0)  # span of the document covered
    tokens: int = 0
    origin: str = "chunk"  # chunk | llm | extractive
    sentences: list[Sentence] = field(default_factory=list)

    def sentence_texts(self) -> list[str]:
        return [self.text[s.start : s.end] for s in self.sentences]

    def importances(self) -> np.ndarray:
        return np.array([s.importance for s in self.sentences], dtype=np.float32)

    def top_sentences(self, k: int) -> list[str]:
        """The ``k`` most important sentences, in the order the node gives them."""
        idx = imp.top_k(self.importances(), 1.0, k) if k > 0 else []
        texts = self.sentence_texts()
        return [texts[i] for i in idx]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "level": self.level,
            "children": list(self.children),
            "leaves": list(self.leaves),
            "char_span": list(self.char_span),
            "tokens": self.tokens,
            "origin": self.origin,
            "text": self.text,
            "sentences": [[s.start, s.end, round(float(s.importance), 4)] for s in self.sentences],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Node:
        return cls(
            id=d["id"],
            level=int(d["level"]),
            text=d["text"],
            children=list(d["children"]),
            leaves=tuple(d["leaves"]),
            char_span=tuple(d["char_span"]),
            tokens=int(d["tokens"]),
            origin=d["origin"],
            sentences=[Sentence(int(a), int(b), float(c)) for a, b, c in d["sentences"]],
        )


@dataclass
class Pyramid:
    nodes: list[Node]
    root_id: str
    #: per-level groups as built: [[child ids, ...] per parent] per level (carried nodes apart)
    groups: list[list[list[str]]] = field(default_factory=list)
    carried: list[list[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.by_id = {n.id: n for n in self.nodes}

    @property
    def root(self) -> Node:
        return self.by_id[self.root_id]

    @property
    def levels(self) -> int:
        return self.root.level + 1

    @property
    def leaves(self) -> list[Node]:
        return [n for n in self.nodes if n.level == 0]

    def at_level(self, level: int) -> list[Node]:
        return [n for n in self.nodes if n.level == level]

    def summary_nodes(self) -> list[Node]:
        return [n for n in self.nodes if n.level > 0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "root": self.root_id,
            "levels": self.levels,
            "nodes": [n.to_dict() for n in self.nodes],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Pyramid:
        return cls([Node.from_dict(n) for n in d["nodes"]], d["root"])


def summary_calls_per_leaf(p: Pyramid) -> float:
    """Summary nodes per leaf: what building ``p`` cost in summary calls, per chunk."""
    n = len(p.leaves)
    return 0.0 if n == 0 else len(p.summary_nodes()) / n
