"""The documentation of each option: the ``#:`` comment above a dataclass field (or its
``field(metadata={"help": ...})``), read once from the class's source."""

from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """``{field: doc}`` for the fields of dataclass ``cls`` (and its dataclass bases) that carry
    a ``#:`` comment block right above them or a ``help`` in their metadata."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass) and klass is not object:
            docs.update(_comments(klass))
    for f in dataclasses.fields(cls):
        if "help" in f.metadata:
            docs[f.name] = str(f.metadata["help"])
    return docs


def _comments(cls: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):  # no source (a frozen app, a class built at run time)
        return {}
    lines = source.splitlines()
    body = ast.parse(source).body[0]
    out: dict[str, str] = {}
    for node in getattr(body, "body", []):
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        block: list[str] = []
        i = node.lineno - 2
        while i >= 0 and lines[i].strip().startswith("#:"):
            block.insert(0, lines[i].strip()[2:].strip())
            i -= 1
        if block:
            out[node.target.id] = " ".join(block)
    return out


__all__ = ["field_docs"]
