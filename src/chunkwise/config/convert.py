"""The one converter: a value read from YAML, or text given on the command line (a flag, a
``--key=value`` override, ``--strategy-args k=v``, a model spec's ``?key=value``), made into
the type its option declares; and the one error format when it cannot be::

    <where>: option <key>=<value> is not valid; expected <what is allowed>
    <where>: unknown option(s) <keys> (did you mean ...?); valid options: <keys>

``<where>`` is the YAML file and line, the flag, the strategy or the model spec.

Text is read by the declared type: ``none``/``null`` for an optional type, true/false/yes/no/
on/off/1/0 for a bool, ``1e3`` for an int, ``a,b`` (or ``[a, b]``) for a list, ``k=v,k2=v2``
(or ``{k: v}``) for a mapping; then the value is coerced: ``int``, ``float``, ``bool``,
``str``, ``Path``, ``X | None``, unions, ``Literal[...]``, enums, ``list``/``tuple``/``set``/
``dict`` of those, and nested dataclasses (built by :mod:`chunkwise.config.build`).
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from chunkwise.config.yaml_io import yaml_value
from chunkwise.errors import BadInput

TRUE = frozenset({"true", "yes", "on", "1", "y"})
FALSE = frozenset({"false", "no", "off", "0", "n"})
NONE = frozenset({"none", "null", "~"})
_SEQUENCES = (list, tuple, set, frozenset, Sequence, typing.Sequence)
MAPPING_TYPES = (dict, Mapping, typing.Mapping)


# --------------------------------------------------------------------------------------------
# the error format


def bad_value(where: str, key: str, value: Any, tp: Any = None, expected: str = "") -> BadInput:
    """``<where>: option <key>=<value> is not valid; expected <what tp allows>`` (or the
    ``expected`` text an options class's own check gives)."""
    shown = repr(value) if not isinstance(value, str) or len(value) <= 80 else repr(value[:80])
    return BadInput(
        f"{where}: option {key}={shown} is not valid; expected {expected or describe(tp)}"
    )


class InvalidOption(BadInput, ValueError):
    """An options class's own check of a value's meaning failed (raise it from
    ``__post_init__``: ``InvalidOption("tp", 0, "a whole number >= 1")``); the builder reports
    it in the one format, naming where the value came from. Raised outside a builder (a config
    made in Python) it is itself a one-line :class:`BadInput`."""

    def __init__(self, key: str, value: Any, expected: str):
        super().__init__(f"option {key}={value!r} is not valid; expected {expected}")
        self.key, self.value, self.expected = key, value, expected


def unknown_options(where: str, keys: Iterable[str], valid: Sequence[str]) -> BadInput:
    """``<where>: unknown option(s) <keys> (did you mean ...?); valid options: <valid>``."""
    keys = [k if k.isprintable() else repr(k) for k in keys]  # a key with a newline: one line
    hint = ""
    if len(keys) == 1:
        prefix, _, leaf = keys[0].rpartition(".")
        close = difflib.get_close_matches(leaf, [v.rpartition(".")[2] for v in valid], n=1)
        if close:
            hint = f" (did you mean {(prefix + '.' if prefix else '') + close[0]!r}?)"
    return BadInput(
        f"{where}: unknown option(s) {', '.join(keys)}{hint}; valid options: "
        f"{', '.join(valid) or '(none)'}"
    )


# --------------------------------------------------------------------------------------------
# types


def is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def section_type(tp: Any) -> type | None:
    """The dataclass a field holds (``Foo`` or ``Foo | None``), else None."""
    if is_dataclass_type(tp):
        return tp
    if is_union(tp):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(inner) == 1 and is_dataclass_type(inner[0]):
            return inner[0]
    return None


def describe(tp: Any) -> str:
    """What an option of type ``tp`` accepts, in words (the ``expected ...`` of errors)."""
    simple = {
        bool: "true or false",
        int: "a whole number",
        float: "a number",
        str: "any text",
        Path: "a path",
        Any: "any value",
        object: "any value",
        type(None): "none",
    }
    if tp in simple:
        return simple[tp]
    if is_union(tp):
        args = typing.get_args(tp)
        if int in args and float in args:  # ``int | float``: a number is what it takes
            args = tuple(a for a in args if a is not int)
        inner = " or ".join(describe(a) for a in args if a is not type(None))
        return f"{inner} or none" if type(None) in args else inner
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return "one of " + ", ".join(str(a) for a in typing.get_args(tp))
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(str(m.value) for m in tp)
    if is_dataclass_type(tp):
        return f"a mapping of {tp.__name__}'s options"
    if origin in _SEQUENCES:
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        if origin is tuple and len(args) > 1 and len(set(args)) > 1:
            return f"a list of {len(args)}: " + ", ".join(describe(a) for a in args)
        item = describe(args[0]) if args else "any value"
        return f"a list (a,b,c), each {item}"
    if origin in MAPPING_TYPES:
        args = typing.get_args(tp)
        value = describe(args[1]) if len(args) == 2 else "any value"
        return f"a mapping (k=v,k2=v2), each value {value}"
    return getattr(tp, "__name__", str(tp))


# --------------------------------------------------------------------------------------------
# text from the command line


class Mismatch(Exception):
    """A value does not fit a type. ``detail`` = (key, value, type) pins the error on an
    item inside a container; without it the caller names the key it was converting."""

    def __init__(self, detail: tuple[str, Any, Any] | None = None):
        super().__init__(detail)
        self.detail = detail


def yaml_scalar(text: str) -> Any:
    """Command-line text read as YAML (text that is not YAML stays text)."""
    return yaml_value(text, "override value")


def parse_pairs(text: str) -> dict[str, str]:
    """``"k=v,k2=v2"`` -> ``{"k": "v", "k2": "v2"}`` (values stay text); raises
    :class:`Mismatch` for a part that is not ``key=value``."""
    out: dict[str, str] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        k, sep, v = part.partition("=")
        if not sep or not k.strip():
            raise Mismatch
        out[k.strip()] = v.strip()
    return out


def from_text(text: str, tp: Any) -> Any:
    """Command-line ``text`` for an option of type ``tp`` as a plain value (not yet checked)."""
    if tp is str or tp is Path:
        return text
    if tp is Any or tp is object:
        return yaml_scalar(text)
    if is_union(tp):
        args = typing.get_args(tp)
        if type(None) in args and text.strip().lower() in NONE:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return from_text(text, inner[0])
        if str in inner:
            # ``int | str``: a number-looking text is a number, anything else stays text
            parsed = yaml_scalar(text)
            return parsed if isinstance(parsed, (int, float, bool)) else text
        return yaml_scalar(text)
    origin = typing.get_origin(tp) or tp
    if origin in _SEQUENCES:
        stripped = text.strip()
        if stripped.startswith("["):
            return yaml_scalar(stripped)
        return [part.strip() for part in stripped.split(",")] if stripped else []
    if is_dataclass_type(tp):
        return yaml_scalar(text)
    if origin in MAPPING_TYPES:
        stripped = text.strip()
        if stripped.startswith(("{", "[")):
            return yaml_scalar(stripped)
        return parse_pairs(stripped)
    return text  # int / float / bool / Literal / Enum: coerce reads them from text


# --------------------------------------------------------------------------------------------
# coercion


def coerce(value: Any, tp: Any, key: str, build: Any = None) -> Any:
    """``value`` as a ``tp``, or :class:`Mismatch`. ``build(cls, mapping, key)`` makes a nested
    dataclass (:mod:`chunkwise.config.build` passes its own; without it, ``cls(**mapping)``)."""
    if tp is Any or tp is object:
        return value
    if tp is type(None):
        if value is None:
            return None
        raise Mismatch
    if is_union(tp):
        return _coerce_union(value, typing.get_args(tp), key, build)
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return _coerce_literal(value, typing.get_args(tp))
    if is_dataclass_type(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise Mismatch
        return build(tp, dict(value), key) if build else tp(**value)
    if origin is not None:
        return _coerce_generic(value, tp, origin, key, build)
    if tp in _SCALARS:
        return _SCALARS[tp](value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return _coerce_enum(value, tp)
    if isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise Mismatch
    return value  # an annotation we do not understand (e.g. a TypeVar): accept as is


def _coerce_union(value: Any, args: tuple[Any, ...], key: str, build: Any) -> Any:
    if value is None:
        if type(None) in args:
            return None
        raise Mismatch
    # an exact type match wins (``int | str`` keeps "5" from YAML a string) ...
    for a in args:
        if isinstance(a, type) and type(value) is a:
            return value
    # ... otherwise the first type that accepts the value
    for a in args:
        if a is type(None):
            continue
        try:
            return coerce(value, a, key, build)
        except Mismatch:
            continue
    raise Mismatch


def _coerce_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in TRUE:
            return True
        if low in FALSE:
            return False
    raise Mismatch


def _coerce_int(value: Any) -> int:
    if isinstance(value, bool):
        raise Mismatch
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise Mismatch
    if isinstance(value, str):
        s = value.strip()
        try:
            return int(s)
        except ValueError:
            pass
        try:
            f = float(s)  # "1e3"
        except ValueError:
            raise Mismatch from None
        if f.is_integer():
            return int(f)
    raise Mismatch


def _coerce_float(value: Any) -> float:
    if isinstance(value, bool):
        raise Mismatch
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            raise Mismatch from None
    raise Mismatch


def _coerce_str(value: Any) -> str:
    if isinstance(value, str):
        return value
    # a bare number in YAML for a text field (``name: 7``) reads as its text; lists,
    # mappings, booleans and null do not
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise Mismatch


def _coerce_path(value: Any) -> Path:
    if isinstance(value, (str, Path)):
        return Path(value)
    raise Mismatch


_SCALARS = {
    bool: _coerce_bool,
    int: _coerce_int,
    float: _coerce_float,
    str: _coerce_str,
    Path: _coerce_path,
}


def _coerce_enum(value: Any, tp: type[enum.Enum]) -> enum.Enum:
    if isinstance(value, tp):
        return value
    for member in tp:
        if value == member.value or (isinstance(value, str) and value == member.name):
            return member
        if isinstance(value, str) and value == str(member.value):
            return member
    raise Mismatch


def _coerce_literal(value: Any, allowed: tuple[Any, ...]) -> Any:
    for a in allowed:
        if type(value) is type(a) and value == a:
            return a
    if isinstance(value, str):  # text from the command line, or a quoted YAML value
        for a in allowed:
            if isinstance(a, bool):
                if value.strip().lower() in (TRUE if a else FALSE):
                    return a
            elif value == str(a):
                return a
    raise Mismatch


def coerce_item(value: Any, tp: Any, key: str, build: Any = None) -> Any:
    """Coerce one item of a container, so that an error names the item, not the container."""
    try:
        return coerce(value, tp, key, build)
    except Mismatch as e:
        raise Mismatch(e.detail or (key, value, tp)) from None


def _coerce_generic(value: Any, tp: Any, origin: Any, key: str, build: Any) -> Any:
    args = typing.get_args(tp)
    if origin in (list, set, frozenset, Sequence, typing.Sequence):
        if not isinstance(value, (list, tuple, set, frozenset)):
            raise Mismatch
        item = args[0] if args else Any
        items = [coerce_item(v, item, f"{key}[{i}]", build) for i, v in enumerate(value)]
        return origin(items) if origin in (set, frozenset) else items
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise Mismatch
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            item = args[0] if args else Any
            return tuple(coerce_item(v, item, f"{key}[{i}]", build) for i, v in enumerate(value))
        if len(value) != len(args):
            raise Mismatch
        return tuple(
            coerce_item(v, a, f"{key}[{i}]", build)
            for i, (v, a) in enumerate(zip(value, args, strict=True))
        )
    if origin in MAPPING_TYPES:
        if not isinstance(value, Mapping):
            raise Mismatch
        k_tp, v_tp = args if len(args) == 2 else (Any, Any)
        return {
            coerce_item(k, k_tp, f"{key} (a key)", build): coerce_item(v, v_tp, f"{key}.{k}", build)
            for k, v in value.items()
        }
    if isinstance(origin, type) and isinstance(value, origin):
        return value
    raise Mismatch


# --------------------------------------------------------------------------------------------
# one option


def convert(where: str, key: str, value: Any, tp: Any) -> Any:
    """Option ``key`` (from ``where``) as a ``tp``: text is read by the type first, other
    values (from YAML or Python) are coerced; anything that does not fit is
    :func:`bad_value`."""
    try:
        return coerce(from_text(value, tp) if isinstance(value, str) else value, tp, key)
    except Mismatch as e:
        if e.detail is not None:
            key, value, tp = e.detail
        raise bad_value(where, key, value, tp) from None


def value_from_text(text: str, tp: Any) -> Any:
    """Command-line ``text`` read as a ``tp``; raises :class:`ValueError` (the caller names the
    key) when it does not fit."""
    try:
        return coerce(from_text(text, tp), tp, "")
    except Mismatch:
        raise ValueError(f"{text!r} is not {describe(tp)}") from None


__all__ = [
    "MAPPING_TYPES",
    "InvalidOption",
    "Mismatch",
    "bad_value",
    "coerce",
    "convert",
    "describe",
    "from_text",
    "parse_pairs",
    "section_type",
    "unknown_options",
    "value_from_text",
]
