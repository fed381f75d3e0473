"""Dataclasses built from a YAML file plus ``--key=value`` overrides (and generated flags).

A config class is an ordinary (possibly nested, possibly frozen) dataclass::

    @dataclass
    class Train:
        #: peak learning rate
        lr: float = 2e-5
        epochs: int = 1

    @dataclass
    class Recipe:
        model: str = "hf:default"
        strategy: Literal["standard", "mapreduce"] = "mapreduce"
        train: Train = field(default_factory=Train)

    cfg = load_config(Recipe, "recipes/tiny/sft.yaml", ["--train.lr=1e-5", "strategy=standard"])

YAML mapping keys map to fields; nested mappings fill nested dataclasses. Overrides are
``--a.b=value`` or ``a.b=value`` (later ones win), or :class:`Override` objects (what
:mod:`chunkwise.config.flags` makes of a command's flags); their text is read by the field's
type (:mod:`chunkwise.config.convert`). Unknown keys and values that do not fit raise one
:class:`~chunkwise.errors.BadInput` naming where the value came from (``file.yaml:3`` or the
flag), the key, the value and what is allowed.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from chunkwise.config.convert import (
    MAPPING_TYPES,
    InvalidOption,
    Mismatch,
    bad_value,
    coerce,
    describe,
    from_text,
    is_dataclass_type,
    section_type,
    unknown_options,
)
from chunkwise.config.yaml_io import read_yaml_file
from chunkwise.errors import BadInput

T = TypeVar("T")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except NameError as e:  # pragma: no cover - a programming error in a config class
        raise TypeError(
            f"cannot resolve the annotations of {cls.__qualname__} ({e}); config classes must "
            "be defined at module level so that their string annotations resolve"
        ) from None


def fields_of(cls: type) -> dict[str, Any]:
    """Settable fields of a dataclass and their resolved types, in declaration order."""
    hints = _hints(cls)
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls) if f.init}


@dataclass(frozen=True)
class Override:
    """A value given on the command line: ``keys`` (``("train", "lr")``), the value (text,
    read by the field's type, or a value a flag already made, e.g. a bool) and ``where`` it
    was given (``--train.lr``, ``--context-window``), for messages."""

    keys: tuple[str, ...]
    value: Any
    where: str


@dataclass(frozen=True)
class _Source:
    """Where file values came from: the file and the line of each key."""

    path: Path | None = None
    lines: Mapping[tuple[str, ...], int] = dataclasses.field(default_factory=dict)

    def where(self, key: str) -> str:
        if self.path is None:
            return "(defaults)"
        parts = tuple(key.split("[")[0].split("."))
        while parts and parts not in self.lines:
            parts = parts[:-1]
        return f"{self.path}:{self.lines[parts]}" if parts else str(self.path)


def _build(cls: type[T], data: dict[str, Any], prefix: str, src: _Source) -> T:
    fields = fields_of(cls)
    kwargs: dict[str, Any] = {}
    for name, raw in data.items():
        key = f"{prefix}{name}"
        if not isinstance(name, str) or name not in fields:
            where = raw.where if isinstance(raw, Override) else src.where(key)
            valid = [f"{prefix}{f}" for f in fields]
            raise unknown_options(where, [str(key)], valid)
        kwargs[name] = _field(raw, fields[name], key, src)
    missing = [
        f.name
        for f in dataclasses.fields(cls)
        if f.init
        and f.name not in kwargs
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        keys = ", ".join(f"{prefix}{m}" for m in missing)
        flag = f"--{prefix}{missing[0]}=VALUE"
        if src.path is None:
            raise BadInput(f"missing required option(s) {keys}: give {flag}")
        raise BadInput(
            f"{src.path}: missing required option(s) {keys}; set them in the file or with {flag}"
        )
    try:
        return cls(**kwargs)
    except InvalidOption as e:
        key, given = f"{prefix}{e.key}", data.get(e.key, e.value)
        where = given.where if isinstance(given, Override) else src.where(key)
        shown = given.value if isinstance(given, Override) else given  # as the user wrote it
        raise bad_value(where, key, shown, expected=e.expected) from None
    except (TypeError, ValueError) as e:
        section = prefix.rstrip(".") or cls.__name__
        raise BadInput(f"{src.where(prefix.rstrip('.'))}: invalid {section}: {e}") from None


def _field(raw: Any, tp: Any, key: str, src: _Source) -> Any:
    where = src.where(key)
    if isinstance(raw, Override):
        where, raw = raw.where, _given(raw, key, tp)
    section = section_type(tp)
    if section is not None and isinstance(raw, dict):
        # nested values may mix file values and overrides: build the section recursively
        return _build(section, raw, f"{key}.", src)

    def build(cls: type, mapping: dict[str, Any], at: str) -> Any:
        return _build(cls, mapping, f"{at}.", src)

    if isinstance(raw, dict) and typing.get_origin(tp) in MAPPING_TYPES:
        args = typing.get_args(tp)
        v_tp = args[1] if len(args) == 2 else Any
        # entries given as --extra.name=value: each read by the value type, named by its flag
        raw = {
            k: _field(v, v_tp, f"{key}.{k}", src) if isinstance(v, Override) else v
            for k, v in raw.items()
        }
    try:
        return coerce(raw, tp, key, build)
    except Mismatch as e:
        if e.detail is not None:
            key, raw, tp = e.detail
        raise bad_value(where, key, raw, tp) from None


def _given(o: Override, key: str, tp: Any) -> Any:
    """An override's value: its text read by the field's type (a flag's value as it is)."""
    if not isinstance(o.value, str):
        return o.value
    try:
        return from_text(o.value, tp)
    except Mismatch:
        raise bad_value(o.where, key, o.value, tp) from None


def parse_override(arg: str) -> tuple[list[str], str]:
    """``--train.lr=1e-5`` -> (["train", "lr"], "1e-5")."""
    body = arg[2:] if arg.startswith("--") else arg
    key, sep, value = body.partition("=")
    key = key.strip()
    if not sep or not key:
        raise BadInput(f"override {arg!r} is not of the form --key=value (e.g. --train.lr=1e-5)")
    parts = key.split(".")
    if any(not p for p in parts):
        raise BadInput(f"override {arg!r} has an empty part in its key {key!r}")
    return parts, value


def _as_override(arg: str | Override) -> Override:
    if isinstance(arg, Override):
        return arg
    parts, value = parse_override(arg)
    return Override(tuple(parts), value, "--" + ".".join(parts))


def _apply(cls: type, tree: dict[str, Any], o: Override) -> None:
    node, node_cls, prefix = tree, cls, ""
    for depth, part in enumerate(o.keys):
        fields = fields_of(node_cls)
        key = prefix + part
        if part not in fields:
            raise unknown_options(o.where, [key], [prefix + f for f in fields])
        if depth == len(o.keys) - 1:
            node[part] = o
            return
        tp = fields[part]
        sub_cls = section_type(tp)
        if sub_cls is None:
            origin = typing.get_origin(tp)
            if origin in MAPPING_TYPES and depth == len(o.keys) - 2:
                # --extra.name=value for a dict field: one more level names the entry
                current = node.get(part)
                if isinstance(current, Override):
                    current = _given(current, key, tp)
                current = {} if current is None else current
                if not isinstance(current, dict):
                    raise BadInput(f"{o.where}: {key!r} does not hold a mapping")
                node[part] = {**current, o.keys[-1]: o}
                return
            raise BadInput(
                f"{o.where}: {key!r} is a value ({describe(tp)}), not a section with options "
                "of its own"
            )
        child = node.get(part)
        if isinstance(child, Override):
            parsed = _given(child, key, tp)
            if not isinstance(parsed, (dict, type(None))):
                raise BadInput(f"{o.where}: {key!r} was set to {child.value!r} before")
            child = parsed
        elif child is not None and not isinstance(child, dict):
            raise BadInput(f"{o.where}: {key!r} holds {child!r} in the config file, not a mapping")
        child = dict(child or {})
        node[part] = child
        node, node_cls, prefix = child, sub_cls, f"{key}."


def load_config(
    cls: type[T], path: str | Path | None = None, overrides: Sequence[str | Override] = ()
) -> T:
    """Read ``path`` (YAML, optional), apply ``overrides`` and validate into ``cls``."""
    if not is_dataclass_type(cls):
        raise TypeError(f"load_config needs a dataclass type, got {cls!r}")
    if isinstance(overrides, str):
        overrides = [overrides]
    if path is not None:
        tree, lines = read_yaml_file(Path(path))
        src = _Source(Path(path), lines)
    else:
        tree, src = {}, _Source()
    tree = dict(tree)
    for arg in overrides:
        _apply(cls, tree, _as_override(arg))
    return _build(cls, tree, "", src)


__all__ = ["Override", "fields_of", "load_config", "parse_override"]
