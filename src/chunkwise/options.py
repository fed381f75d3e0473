"""A component's options given as text or values: ``--strategy-args k=v,k2=v2``, a YAML
``strategy_args:`` mapping, Python keyword arguments, a model spec's ``?key=value``.

A component declares its options once: a strategy by its constructor's annotated parameters
(documented in its class docstring), a model backend by an options dataclass with a ``#:``
comment per field (:mod:`chunkwise.llm.backend_options`). Text is converted by the declared
type through the one converter (:func:`chunkwise.config.convert`); values set from Python pass
unchanged. A value that does not fit, or a key the component does not have, is one
:class:`~chunkwise.errors.BadInput` in the one format::

    strategy 'mapreduce': option chunk_tokens='many' is not valid; expected a whole number
    model spec 'hf:default?ctx=big': option ctx='big' is not valid; expected a whole number

What a value means (a temperature's range, a known prompt set) is the component's to check.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from chunkwise.config import convert, describe, unknown_options
from chunkwise.config.convert import InvalidOption, Mismatch, bad_value, parse_pairs
from chunkwise.errors import BadInput

T = TypeVar("T")

_SKIPPED_KINDS = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


@functools.cache
def option_types(target: Callable[..., Any]) -> dict[str, Any]:
    """The options ``target`` takes and their declared types, in order: a dataclass's fields,
    or a class's ``__init__`` (a function's) parameters. A parameter without an annotation
    takes its default's type (or any value)."""
    func = target.__init__ if isinstance(target, type) else target
    try:
        hints = typing.get_type_hints(target if dataclasses.is_dataclass(target) else func)
    except (NameError, TypeError):  # an annotation that does not resolve: use the defaults
        hints = {}
    if isinstance(target, type) and dataclasses.is_dataclass(target):
        return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(target) if f.init}
    params = list(inspect.signature(func).parameters.values())
    if isinstance(target, type):
        params = params[1:]  # self
    out: dict[str, Any] = {}
    for p in params:
        if p.kind in _SKIPPED_KINDS:
            continue
        default = p.default
        fallback = type(default) if default not in (inspect.Parameter.empty, None) else Any
        out[p.name] = hints.get(p.name, fallback)
    return out


_DOC_ROW = re.compile(r"^(?P<names>\w+(?:, \w+)*)\s{2,}(?P<text>\S.*)$")


@functools.cache
def option_docs(cls: type) -> dict[str, str]:
    """``{option: doc}`` from a strategy's docstring table (its bases' too): after a line
    starting with "Options" or ending with ":", each line ``name    meaning`` (or ``a, b
    meaning``) at the table's indentation, continued by deeper-indented lines."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        lines = inspect.cleandoc(klass.__dict__.get("__doc__") or "").splitlines()
        current: list[str] = []
        indent = None
        for line in lines:
            stripped = line.strip()
            depth = len(line) - len(line.lstrip())
            m = _DOC_ROW.match(stripped)
            if m and (indent is None or depth == indent):
                indent = depth
                current = [n.strip() for n in m["names"].split(",")]
                for n in current:
                    docs[n] = m["text"].strip()
            elif current and stripped and indent is not None and depth > indent:
                for n in current:
                    docs[n] += " " + stripped
            else:
                current = []
    return docs


def convert_option(owner: str, key: str, text: str, tp: Any) -> Any:
    """Option ``key`` of ``owner`` (``strategy 'dtcrs'``) given as ``text``, as a ``tp``."""
    return convert(owner, key, text, tp)


def convert_options(owner: str, target: Callable[..., Any], options: Mapping[str, Any]) -> dict:
    """``options`` checked against what ``target`` takes, text values converted by type."""
    known = option_types(target)
    unknown = [k for k in options if k not in known]
    if unknown:
        raise unknown_options(owner, unknown, sorted(known))
    return {
        k: convert(owner, k, v, known[k]) if isinstance(v, str) else v for k, v in options.items()
    }


def build_options(owner: str, cls: type[T], options: Mapping[str, Any]) -> T:
    """An options dataclass ``cls`` filled from ``options`` (text or values), e.g. a model
    backend's from its spec's ``?key=value`` pairs."""
    try:
        return cls(**convert_options(owner, cls, options))
    except InvalidOption as e:  # the dataclass's own check of a value's meaning
        given = options.get(e.key, e.value)  # shown as the user wrote it
        raise bad_value(owner, e.key, given, expected=e.expected) from None


def parse_strategy_args(text: str | None, where: str = "--strategy-args") -> dict[str, str]:
    """``"k=v,k2=v2"`` -> ``{"k": "v", "k2": "v2"}`` (values stay text)."""
    try:
        return parse_pairs(text or "")
    except Mismatch:
        raise BadInput(
            f"{where}: {text!r} is not valid; expected key=value pairs joined by commas "
            "(chunk_tokens=500,grounding=true)"
        ) from None


__all__ = [
    "build_options",
    "convert_option",
    "convert_options",
    "describe",
    "option_docs",
    "option_types",
    "parse_strategy_args",
]
