"""Options given as text (``--strategy-args k=v,k2=v2``), converted by their declared types.

A component's options are the parameters of its constructor; each is converted by its type
annotation (``int``, ``float``, ``bool``, ``str``, ``X | None``, ``Literal[...]``, lists), by
the same rules as config overrides (:func:`chunkwise.config.value_from_text`): ``none`` for an
optional option, true/false/yes/no/on/off/1/0 for a bool, ``a,b`` for a list. A value that does
not fit is one :class:`~chunkwise.errors.BadInput` naming the key, the value and what is
allowed. Values that are not text (set from Python) pass unchanged. What a value means (a
temperature's range, a known prompt set) is the component's to check, in one place.

This is the one place where option text becomes typed values; strategies use it through
:func:`chunkwise.strategies.get_strategy`.
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from chunkwise.config import type_name, value_from_text
from chunkwise.errors import BadInput

_SKIPPED_KINDS = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


@functools.cache
def option_types(target: Callable[..., Any]) -> dict[str, Any]:
    """The options ``target`` takes (a class: its ``__init__``) and their declared types, in
    order. An option without an annotation takes its default's type (or any value)."""
    func = target.__init__ if isinstance(target, type) else target
    params = list(inspect.signature(func).parameters.values())
    if isinstance(target, type):
        params = params[1:]  # self
    try:
        hints = typing.get_type_hints(func)
    except (NameError, TypeError):  # an annotation that does not resolve: use the defaults
        hints = {}
    out: dict[str, Any] = {}
    for p in params:
        if p.kind in _SKIPPED_KINDS:
            continue
        default = p.default
        fallback = type(default) if default not in (inspect.Parameter.empty, None) else Any
        out[p.name] = hints.get(p.name, fallback)
    return out


def describe(tp: Any) -> str:
    """What text an option of type ``tp`` accepts, in words."""
    if tp is bool:
        return "true or false"
    if tp is int:
        return "a whole number"
    if tp is float:
        return "a number"
    if tp is str:
        return "any text"
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        inner = " or ".join(describe(a) for a in args if a is not type(None))
        return f"{inner} or none" if type(None) in args else inner
    if origin is typing.Literal:
        return "one of " + ", ".join(str(a) for a in typing.get_args(tp))
    if origin in (list, tuple, set, frozenset):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        item = describe(args[0]) if args else "any text"
        return f"a comma-separated list (each {item})"
    return type_name(tp)


def convert_option(owner: str, key: str, text: str, tp: Any) -> Any:
    """Option ``key`` of ``owner`` (``strategy 'dtcrs'``) given as ``text``, as a ``tp``."""
    try:
        return value_from_text(text, tp)
    except ValueError:
        raise BadInput(
            f"{owner}: option {key}={text!r} is not valid; expected {describe(tp)}"
        ) from None


def convert_options(owner: str, target: Callable[..., Any], options: Mapping[str, Any]) -> dict:
    """``options`` checked against what ``target`` takes, text values converted by type."""
    known = option_types(target)
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key not in known:
            raise BadInput(f"{owner} has no option {key!r}; valid: {', '.join(sorted(known))}")
        out[key] = (
            convert_option(owner, key, value, known[key]) if isinstance(value, str) else value
        )
    return out


__all__ = ["convert_option", "convert_options", "describe", "option_types"]
