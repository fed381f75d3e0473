"""The summary tree: nodes (leaves at layer 0, summaries above) and their embeddings."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chunkwise.errors import BadInput

TREE_FORMAT = 1


@dataclass
class Node:
    index: int
    text: str
    layer: int
    tokens: int
    children: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "text": self.text,
            "layer": self.layer,
            "tokens": self.tokens,
            "children": list(self.children),
        }


@dataclass
class Tree:
    """Nodes (leaves first), one embedding row per node, node ids per layer, build record."""

    nodes: list[Node]
    embeddings: np.ndarray
    layers: list[list[int]]
    build: dict[str, Any] = field(default_factory=dict)

    @property
    def summary_nodes(self) -> int:
        return sum(1 for n in self.nodes if n.layer > 0)

    def add_layer(self, nodes: list[Node], embeddings: np.ndarray) -> None:
        self.nodes.extend(nodes)
        self.embeddings = (
            np.concatenate([self.embeddings, embeddings], axis=0) if len(nodes) else self.embeddings
        )
        self.layers.append([n.index for n in nodes])

    def leaves_only(self) -> Tree:
        """A copy holding the leaves alone (summary layers added to it stay its own)."""
        leaves = self.layers[0]
        return Tree([self.nodes[i] for i in leaves], self.embeddings[leaves].copy(), [list(leaves)])

    def to_json(self) -> str:
        return json.dumps(
            {
                "format": TREE_FORMAT,
                "nodes": [n.to_dict() for n in self.nodes],
                "embeddings": np.asarray(self.embeddings, dtype=np.float32).tolist(),
                "layers": self.layers,
                "build": self.build,
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> Tree:
        data = json.loads(text)
        if data.get("format") != TREE_FORMAT:
            raise BadInput(f"tree cache format {data.get('format')!r}, expected {TREE_FORMAT}")
        nodes = [
            Node(d["index"], d["text"], d["layer"], d["tokens"], tuple(d["children"]))
            for d in data["nodes"]
        ]
        emb = np.asarray(data["embeddings"], dtype=np.float32).reshape(len(nodes), -1)
        return cls(nodes, emb, [list(x) for x in data["layers"]], dict(data.get("build", {})))
