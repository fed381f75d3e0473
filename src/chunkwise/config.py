"""Configuration: a YAML file plus ``--key=value`` overrides, validated into dataclasses.

A config class is an ordinary (possibly nested, possibly frozen) dataclass::

    @dataclass
    class Train:
        lr: float = 2e-5
        epochs: int = 1

    @dataclass
    class Recipe:
        model: str = "hf:default"
        strategy: Literal["standard", "mapreduce"] = "mapreduce"
        train: Train = field(default_factory=Train)

    cfg = load_config(Recipe, "recipes/tiny/sft.yaml", ["--train.lr=1e-5", "strategy=standard"])

Rules:

* YAML mapping keys map to fields; nested mappings fill nested dataclasses.
* Overrides are ``--a.b=value`` or ``a.b=value``; later ones win. Their values are text and
  are read according to the field's annotated type (``--stop=a,b`` for a list,
  ``--seed=none`` for an optional field, ``--train={lr: 1e-5}`` for a section).
* Values are coerced to the annotated type: ``int``, ``float`` (``1e-5`` included, which
  PyYAML reads as a string), ``bool`` (true/false/yes/no/on/off/1/0), ``str``, ``Path``,
  ``Optional[...]``, unions, ``Literal[...]``, enums, ``list``/``tuple``/``set``/``dict`` of
  those, and nested dataclasses.
* Unknown keys (in the file or in an override) and values of the wrong type raise
  :class:`chunkwise.errors.BadInput` naming the key, where it came from, and what is valid.
"""

from __future__ import annotations

import dataclasses
import difflib
import enum
import functools
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from chunkwise.errors import BadInput

T = TypeVar("T")

_TRUE = {"true", "yes", "on", "1", "y"}
_FALSE = {"false", "no", "off", "0", "n"}
_NONE = {"none", "null", "~"}


# --------------------------------------------------------------------------------------------
# reading YAML (duplicate keys are an error: PyYAML would silently keep the last one)


class _StrictLoader(yaml.SafeLoader):
    pass


def _mapping_without_duplicates(loader: _StrictLoader, node: yaml.MappingNode) -> dict:
    loader.flatten_mapping(node)
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            continue  # let the normal constructor report unhashable keys
        line = key_node.start_mark.line + 1
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first on line {seen[key]}, again on line {line})",
                key_node.start_mark,
            )
        seen[key] = line
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates
)


#: deepest nesting of lists and mappings a YAML file may hold (configs need a handful)
MAX_YAML_DEPTH = 100


def _too_deep(obj: Any, limit: int) -> bool:
    """Whether ``obj`` nests lists/mappings deeper than ``limit`` (iterative: no recursion)."""
    stack = [(obj, 1)]
    # YAML anchors share nodes: each is walked once per depth (a shared node costs little, a
    # cycle of aliases counts as endless nesting)
    seen: set[tuple[int, int]] = set()
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        if (id(node), depth) in seen:
            continue
        seen.add((id(node), depth))
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def load_yaml(text: str, source: str | Path) -> Any:
    """Parse YAML ``text`` read from ``source`` (a file name, for messages) safely.

    Every YAML read in the package goes through here: only plain data (no Python objects),
    duplicate keys refused, and anything the parser cannot take (bad syntax, nesting so deep
    that the parser runs out of stack, more than :data:`MAX_YAML_DEPTH` levels) becomes a
    one-line :class:`BadInput` naming ``source`` (and the line where the parser knows it).
    """
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{source}:{mark.line + 1}" if mark is not None else str(source)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise BadInput(f"{where}: invalid YAML: {problem}") from None
    except RecursionError:
        raise BadInput(
            f"{source}: invalid YAML: nested too deeply to read (at most {MAX_YAML_DEPTH} "
            "levels of lists and mappings)"
        ) from None
    except (ValueError, TypeError, OverflowError, MemoryError) as e:
        # constructor failures PyYAML does not wrap (e.g. an out-of-range timestamp)
        raise BadInput(f"{source}: invalid YAML: {type(e).__name__}: {e}") from None
    if isinstance(data, (dict, list)) and _too_deep(data, MAX_YAML_DEPTH):
        raise BadInput(
            f"{source}: nested deeper than {MAX_YAML_DEPTH} levels of lists and mappings"
        )
    return data


def _read_yaml(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise BadInput(f"config file {path} not found")
    if path.is_dir():
        raise BadInput(f"config path {path} is a directory; pass a YAML file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"cannot read config file {path}: {e}") from None
    data = load_yaml(text, path)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BadInput(
            f"config file {path} must hold a mapping of keys to values at the top level, "
            f"not a {type(data).__name__}"
        )
    return data


# --------------------------------------------------------------------------------------------
# type helpers


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except NameError as e:  # pragma: no cover - a programming error in a config class
        raise TypeError(
            f"cannot resolve the annotations of {cls.__qualname__} ({e}); config classes must "
            "be defined at module level so that their string annotations resolve"
        ) from None


def _fields(cls: type) -> dict[str, Any]:
    """Settable fields of a dataclass and their resolved types, in declaration order."""
    hints = _hints(cls)
    return {f.name: hints.get(f.name, Any) for f in dataclasses.fields(cls) if f.init}


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _section_type(tp: Any) -> type | None:
    """The dataclass a field holds (``Foo`` or ``Foo | None``), else None."""
    if _is_dataclass_type(tp):
        return tp
    if _is_union(tp):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(inner) == 1 and _is_dataclass_type(inner[0]):
            return inner[0]
    return None


def _type_name(tp: Any) -> str:
    if tp is Any:
        return "any value"
    if tp is type(None):
        return "null"
    if _is_union(tp):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin is not None:
        args = ", ".join("..." if a is Ellipsis else _type_name(a) for a in typing.get_args(tp))
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{args}]" if args else name
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return "one of " + ", ".join(repr(m.value) for m in tp)
    if _is_dataclass_type(tp):
        return f"a mapping for {tp.__name__}"
    return getattr(tp, "__name__", str(tp))


# --------------------------------------------------------------------------------------------
# coercion


class _Mismatch(Exception):
    """Internal: a value does not fit a type (turned into BadInput with the key's name).

    Raised bare where the caller knows the key; ``detail`` = (key, value, type, where) pins
    the error on an item inside a container, or on a value that came from an override.
    """

    def __init__(self, detail: tuple[str, Any, Any, str] | None = None):
        super().__init__(detail)
        self.detail = detail


@dataclasses.dataclass(frozen=True)
class _Override:
    """A value given on the command line: text, plus the argument it came from."""

    text: str
    arg: str


def _from_text(text: str, tp: Any) -> Any:
    """Read command-line text for a field of type ``tp`` into a plain Python value."""
    if tp is str or tp is Path:
        return text
    if tp is Any or tp is object:
        return _yaml_scalar(text)
    if _is_union(tp):
        args = typing.get_args(tp)
        if type(None) in args and text.strip().lower() in _NONE:
            return None
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _from_text(text, inner[0])
        if str in inner:
            # ``int | str``: a number-looking text is a number, anything else stays text
            parsed = _yaml_scalar(text)
            return parsed if isinstance(parsed, (int, float, bool)) else text
        return _yaml_scalar(text)
    origin = typing.get_origin(tp) or tp
    if origin in (list, tuple, set, frozenset, Sequence, typing.Sequence):
        stripped = text.strip()
        if stripped.startswith("["):
            return _yaml_scalar(stripped)
        if not stripped:
            return []
        return [part.strip() for part in stripped.split(",")]
    if origin in (dict, Mapping, typing.Mapping) or _is_dataclass_type(tp):
        return _yaml_scalar(text)
    return text  # int / float / bool / Literal / Enum: handled from text by _coerce


def _yaml_scalar(text: str) -> Any:
    """An override's text read as YAML (text that is not YAML stays text)."""
    shown = repr(text[:40]) + ("..." if len(text) > 40 else "")
    try:
        value = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError:
        return text
    except RecursionError:
        value = None
        deep = True
    else:
        deep = isinstance(value, (dict, list)) and _too_deep(value, MAX_YAML_DEPTH)
    if deep:
        raise BadInput(
            f"override value {shown} is nested deeper than {MAX_YAML_DEPTH} levels of lists "
            "and mappings"
        )
    return value


def _coerce_item(value: Any, tp: Any, key: str, source: str) -> Any:
    """Coerce one item of a container, so that an error names the item, not the container."""
    if isinstance(value, _Override):
        source = f"from override {value.arg!r}"
        value = _from_text(value.text, tp)
    try:
        return _coerce(value, tp, key, source)
    except _Mismatch as e:
        raise _Mismatch(e.detail or (key, value, tp, source)) from None


def _coerce(value: Any, tp: Any, key: str, source: str) -> Any:
    """Convert ``value`` to ``tp``; raise _Mismatch when it cannot."""
    if tp is Any or tp is object:
        return value
    if tp is type(None):
        if value is None:
            return None
        raise _Mismatch
    if _is_union(tp):
        args = typing.get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise _Mismatch
        # an exact type match wins (``int | str`` keeps "5" from YAML a string) ...
        for a in args:
            if isinstance(a, type) and type(value) is a:
                return value
        # ... otherwise the first type that accepts the value
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, key, source)
            except _Mismatch:
                continue
        raise _Mismatch
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        return _coerce_literal(value, typing.get_args(tp))
    if _is_dataclass_type(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise _Mismatch
        return _build(tp, dict(value), f"{key}.", source)
    if origin is not None:
        return _coerce_generic(value, tp, origin, key, source)
    if tp is bool:
        return _coerce_bool(value)
    if tp is int:
        return _coerce_int(value)
    if tp is float:
        if isinstance(value, bool):
            raise _Mismatch
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                raise _Mismatch from None
        raise _Mismatch
    if tp is str:
        if isinstance(value, str):
            return value
        # a bare number or boolean in YAML for a text field (``name: 7``) reads as its text;
        # lists, mappings and null do not
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise _Mismatch
    if tp is Path:
        if isinstance(value, (str, Path)):
            return Path(value)
        raise _Mismatch
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if isinstance(value, tp):
            return value
        for member in tp:
            if value == member.value or (isinstance(value, str) and value == member.name):
                return member
            if isinstance(value, str) and value == str(member.value):
                return member
        raise _Mismatch
    if isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise _Mismatch
    return value  # an annotation we do not understand (e.g. a TypeVar): accept as is


def _coerce_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        low = value.strip().lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
    raise _Mismatch


def _coerce_int(value: Any) -> int:
    if isinstance(value, bool):
        raise _Mismatch
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise _Mismatch
    if isinstance(value, str):
        s = value.strip()
        try:
            return int(s)
        except ValueError:
            pass
        try:
            f = float(s)  # "1e3"
        except ValueError:
            raise _Mismatch from None
        if f.is_integer():
            return int(f)
    raise _Mismatch


def _coerce_literal(value: Any, allowed: tuple[Any, ...]) -> Any:
    for a in allowed:
        if type(value) is type(a) and value == a:
            return a
    if isinstance(value, str):  # text from the command line, or a quoted YAML value
        for a in allowed:
            if isinstance(a, bool):
                if value.strip().lower() in (_TRUE if a else _FALSE):
                    return a
            elif value == str(a):
                return a
    raise _Mismatch


def _coerce_generic(value: Any, tp: Any, origin: Any, key: str, source: str) -> Any:
    args = typing.get_args(tp)
    if origin in (list, set, frozenset, Sequence, typing.Sequence):
        if not isinstance(value, (list, tuple, set, frozenset)):
            raise _Mismatch
        item_tp = args[0] if args else Any
        items = [_coerce_item(v, item_tp, f"{key}[{i}]", source) for i, v in enumerate(value)]
        if origin in (set, frozenset):
            return origin(items)
        return items
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise _Mismatch
        if not args or (len(args) == 2 and args[1] is Ellipsis):
            item_tp = args[0] if args else Any
            return tuple(
                _coerce_item(v, item_tp, f"{key}[{i}]", source) for i, v in enumerate(value)
            )
        if len(value) != len(args):
            raise _Mismatch
        return tuple(
            _coerce_item(v, a, f"{key}[{i}]", source)
            for i, (v, a) in enumerate(zip(value, args, strict=True))
        )
    if origin in (dict, Mapping, typing.Mapping):
        if not isinstance(value, Mapping):
            raise _Mismatch
        k_tp, v_tp = args if len(args) == 2 else (Any, Any)
        return {
            _coerce_item(k, k_tp, f"{key} (a key)", source): _coerce_item(
                v, v_tp, f"{key}.{k}", source
            )
            for k, v in value.items()
        }
    if isinstance(origin, type) and isinstance(value, origin):
        return value
    raise _Mismatch


def value_from_text(text: str, tp: Any) -> Any:
    """Command-line ``text`` read as a value of type ``tp``, by the rules of ``--key=value``
    overrides (``none`` for an optional type, ``a,b`` for a list, true/false/yes/no for a
    bool, ``1e3`` for an int). Raises :class:`ValueError` when the text does not fit ``tp``
    (the caller names the key); :func:`type_name` describes ``tp`` for that message."""
    try:
        return _coerce(_from_text(text, tp), tp, "", "")
    except _Mismatch:
        raise ValueError(f"{text!r} is not {_type_name(tp)}") from None


def type_name(tp: Any) -> str:
    """A type annotation in words, as config errors show it (``int or null``)."""
    return _type_name(tp)


# --------------------------------------------------------------------------------------------
# building dataclasses


def _unknown_key(key: str, valid: Sequence[str], source: str, section: str) -> BadInput:
    leaf = key.rsplit(".", 1)[-1]
    close = difflib.get_close_matches(leaf, valid, n=1)
    hint = f" (did you mean {section}{close[0]!r}?)" if close else ""
    where = f" in section {section.rstrip('.')!r}" if section else ""
    return BadInput(
        f"unknown config key {key!r} {source}{hint}; valid keys{where}: "
        f"{', '.join(valid) or '(none)'}"
    )


def _build(cls: type[T], data: dict[str, Any], prefix: str, source: str) -> T:
    fields = _fields(cls)
    kwargs: dict[str, Any] = {}
    for name, raw in data.items():
        key = f"{prefix}{name}"
        if not isinstance(name, str) or name not in fields:
            raise _unknown_key(str(key), list(fields), source, prefix)
        tp = fields[name]
        where = source
        if isinstance(raw, _Override):
            where = f"from override {raw.arg!r}"
            raw = _from_text(raw.text, tp)
        kwargs[name] = _coerce_field(raw, tp, key, where)
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
        raise BadInput(
            f"missing required config key(s) {keys} {source}; set them in the YAML file "
            f"or with --{prefix}{missing[0]}=VALUE"
        )
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        section = prefix.rstrip(".") or cls.__name__
        raise BadInput(f"invalid config for {section} {source}: {e}") from None


def _coerce_field(raw: Any, tp: Any, key: str, where: str) -> Any:
    section = _section_type(tp)
    if section is not None and isinstance(raw, dict):
        # nested values may mix file values and overrides: build the section recursively
        return _build(section, raw, f"{key}.", where)
    try:
        return _coerce(raw, tp, key, where)
    except _Mismatch as e:
        if e.detail is not None:
            key, raw, tp, where = e.detail
        raise BadInput(
            f"config key {key!r} {where}: expected {_type_name(tp)}, got {raw!r}"
        ) from None


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


def _apply_override(cls: type, tree: dict[str, Any], arg: str) -> None:
    parts, value = parse_override(arg)
    node, node_cls, prefix = tree, cls, ""
    for depth, part in enumerate(parts):
        fields = _fields(node_cls)
        key = prefix + part
        if part not in fields:
            raise _unknown_key(key, list(fields), f"in override {arg!r}", prefix)
        last = depth == len(parts) - 1
        if last:
            node[part] = _Override(value, arg)
            return
        tp = fields[part]
        sub_cls = _section_type(tp)
        if sub_cls is None:
            origin = typing.get_origin(tp)
            if origin in (dict, Mapping, typing.Mapping) and depth == len(parts) - 2:
                # --extra.name=value for a dict field: one more level names the entry
                current = node.get(part)
                if isinstance(current, _Override) or current is None:
                    current = {} if current is None else _from_text(current.text, tp)
                if not isinstance(current, dict):
                    raise BadInput(f"override {arg!r}: {key!r} does not hold a mapping")
                current = dict(current)
                current[parts[-1]] = _Override(value, arg)
                node[part] = current
                return
            raise BadInput(
                f"override {arg!r}: {key!r} is a value of type {_type_name(tp)}, not a section "
                "with keys of its own"
            )
        child = node.get(part)
        if child is None:
            child = {}
        elif isinstance(child, _Override):
            parsed = _from_text(child.text, tp)
            if parsed is None:
                parsed = {}
            if not isinstance(parsed, dict):
                raise BadInput(f"override {arg!r}: {key!r} was set to {child.text!r} earlier")
            child = parsed
        elif not isinstance(child, dict):
            raise BadInput(
                f"override {arg!r}: {key!r} holds {child!r} in the config file, not a mapping"
            )
        else:
            child = dict(child)
        node[part] = child
        node, node_cls, prefix = child, sub_cls, f"{key}."


def load_config(cls: type[T], path: str | Path | None = None, overrides: Sequence[str] = ()) -> T:
    """Read ``path`` (YAML, optional), apply ``overrides`` and validate into ``cls``."""
    if not _is_dataclass_type(cls):
        raise TypeError(f"load_config needs a dataclass type, got {cls!r}")
    if isinstance(overrides, str):
        overrides = [overrides]
    if path is not None:
        path = Path(path)
        tree = _read_yaml(path)
        source = f"in {path}"
    else:
        tree, source = {}, "(no config file)"
    tree = dict(tree)
    for arg in overrides:
        _apply_override(cls, tree, arg)
    return _build(cls, tree, "", source)


# --------------------------------------------------------------------------------------------
# writing


def config_to_dict(obj: Any) -> Any:
    """A dataclass (or container of them) as plain YAML/JSON-ready values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {
            f.name: config_to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.init
        }
    if isinstance(obj, Mapping):
        return {config_to_dict(k): config_to_dict(v) for k, v in obj.items()}
    if isinstance(obj, (set, frozenset)):
        items = [config_to_dict(v) for v in obj]
        try:
            return sorted(items)
        except TypeError:
            return items
    if isinstance(obj, (list, tuple)):
        return [config_to_dict(v) for v in obj]
    if isinstance(obj, enum.Enum):
        return config_to_dict(obj.value)
    if isinstance(obj, Path):
        return str(obj)
    return obj


class _Dumper(yaml.SafeDumper):
    pass


def _represent_str(dumper: _Dumper, data: str) -> yaml.ScalarNode:
    # YAML readers treat NEL / LS / PS as line breaks; written raw (allow_unicode) they would
    # come back as different text, so strings holding them are written double-quoted, where
    # the emitter escapes them.
    if any(c in data for c in "\x85\u2028\u2029"):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"')
    return dumper.represent_str(data)


_Dumper.add_representer(str, _represent_str)


def to_yaml(obj: Any) -> str:
    """``obj`` (a dataclass or plain mapping) as YAML text that :func:`load_config` reads back."""
    return yaml.dump(
        config_to_dict(obj),
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
    )


def dump_yaml(obj: Any, path: str | Path) -> Path:
    """Write ``obj`` (a dataclass or plain mapping) as YAML, atomically. Returns the path."""
    from chunkwise.io import atomic_write_text

    text = to_yaml(obj)
    path = Path(path)
    atomic_write_text(path, text)
    return path


__all__ = [
    "MAX_YAML_DEPTH",
    "config_to_dict",
    "dump_yaml",
    "load_config",
    "load_yaml",
    "parse_override",
    "to_yaml",
    "type_name",
    "value_from_text",
]
