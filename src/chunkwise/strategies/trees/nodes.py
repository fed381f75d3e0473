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
    def from_json(cls, text: str | bytes, source: str = "tree cache") -> Tree:
        """The tree :meth:`to_json` wrote; anything else is one :class:`BadInput` naming
        ``source`` (the cache file) and the field."""
        from chunkwise.io import JSONInputError, parse_json

        try:
            data = parse_json(text, allow_nan=True)  # to_json writes what the embedder gave
        except JSONInputError as e:
            raise BadInput(
                f"{source}: not valid JSON ({e}); delete it to build the tree again"
            ) from None
        if not isinstance(data, dict) or data.get("format") != TREE_FORMAT:
            got = data.get("format") if isinstance(data, dict) else None
            raise BadInput(
                f"{source}: tree cache format {got!r}, expected {TREE_FORMAT}; delete it to "
                "build the tree again"
            )
        try:
            return cls._checked(data)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            what = e.args[0] if isinstance(e, KeyError) else e
            raise BadInput(
                f"{source}: not a tree this version wrote (bad or missing {what}); delete it to "
                "build the tree again"
            ) from None

    @classmethod
    def _checked(cls, data: dict[str, Any]) -> Tree:
        def whole(v: Any, what: str) -> int:
            if type(v) is not int:
                raise TypeError(what)
            return v

        if not isinstance(data["nodes"], list):
            raise TypeError("nodes")
        nodes = []
        for i, d in enumerate(data["nodes"]):
            where = f"nodes[{i}]"
            if not isinstance(d, dict) or not isinstance(d.get("text"), str):
                raise TypeError(f"{where}.text")
            if not isinstance(d.get("children", []), list):
                raise TypeError(f"{where}.children")
            children = tuple(whole(c, f"{where}.children") for c in d["children"])
            nodes.append(
                Node(
                    whole(d["index"], f"{where}.index"),
                    d["text"],
                    whole(d["layer"], f"{where}.layer"),
                    whole(d["tokens"], f"{where}.tokens"),
                    children,
                )
            )
        n = len(nodes)
        if any(
            node.index != i or not all(0 <= c < n for c in node.children)
            for i, node in enumerate(nodes)
        ):
            raise ValueError("nodes[].index or nodes[].children (node numbers in order)")
        if not isinstance(data["layers"], list) or not data["layers"]:
            raise ValueError("layers")
        layers = [
            [whole(i, "layers") for i in layer]
            for layer in data["layers"]
            if isinstance(layer, list)
        ]
        if len(layers) != len(data["layers"]) or any(not 0 <= i < n for x in layers for i in x):
            raise ValueError("layers")
        try:
            emb = np.asarray(data["embeddings"], dtype=np.float32)
        except (TypeError, ValueError):
            raise ValueError("embeddings") from None
        if n == 0 and emb.size == 0:
            emb = emb.reshape(0, 0)
        if emb.ndim != 2 or len(emb) != n:
            raise ValueError("embeddings")
        build = data.get("build", {})
        if not isinstance(build, dict):
            raise TypeError("build")
        return cls(nodes, emb, layers, dict(build))
