"""YAML in and out: every YAML file the package reads or writes goes through here.

Reading is safe (plain data only), refuses duplicate keys (PyYAML would silently keep the
last one) and nesting deeper than :data:`MAX_YAML_DEPTH`, and turns every parser failure into
one :class:`~chunkwise.errors.BadInput` naming the file and line. :func:`key_lines` tells on
which line each key of a mapping stands, so that a config error can name it. Writing is
atomic and reads back to the same values.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from chunkwise.errors import BadInput

#: deepest nesting of lists and mappings a YAML file may hold (configs need a handful)
MAX_YAML_DEPTH = 100


class StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate mapping keys."""


def _mapping_without_duplicates(loader: StrictLoader, node: yaml.MappingNode) -> dict:
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


StrictLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates
)


def too_deep(obj: Any, limit: int = MAX_YAML_DEPTH) -> bool:
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

    Only plain data (no Python objects), duplicate keys refused, and anything the parser
    cannot take (bad syntax, nesting so deep that the parser runs out of stack, more than
    :data:`MAX_YAML_DEPTH` levels) becomes a one-line :class:`BadInput` naming ``source`` (and
    the line where the parser knows it).
    """
    try:
        data = yaml.load(text, Loader=StrictLoader)
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
    if isinstance(data, (dict, list)) and too_deep(data, MAX_YAML_DEPTH):
        raise BadInput(
            f"{source}: nested deeper than {MAX_YAML_DEPTH} levels of lists and mappings"
        )
    return data


def yaml_value(text: str, what: str) -> Any:
    """Short text (a command-line value) read as YAML; text that is not YAML stays text.
    Nesting past :data:`MAX_YAML_DEPTH` is a :class:`BadInput` calling the text ``what``."""
    try:
        value = yaml.load(text, Loader=StrictLoader)
    except yaml.YAMLError:
        return text
    except RecursionError:
        value, deep = None, True
    else:
        deep = isinstance(value, (dict, list)) and too_deep(value, MAX_YAML_DEPTH)
    if deep:
        shown = repr(text[:40]) + ("..." if len(text) > 40 else "")
        raise BadInput(
            f"{what} {shown} is nested deeper than {MAX_YAML_DEPTH} levels of lists and mappings"
        )
    return value


def key_lines(text: str) -> dict[tuple[str, ...], int]:
    """The line (1-based) of every key of nested mappings in YAML ``text`` that
    :func:`load_yaml` has read: ``{("train", "lr"): 3, ...}`` (empty if it cannot tell)."""
    try:
        root = yaml.compose(text, Loader=StrictLoader)
    except (yaml.YAMLError, RecursionError):
        return {}
    lines: dict[tuple[str, ...], int] = {}
    stack: list[tuple[Any, tuple[str, ...]]] = [(root, ())]
    while stack:
        node, path = stack.pop()
        if not isinstance(node, yaml.MappingNode) or len(path) > MAX_YAML_DEPTH:
            continue
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode):
                key = (*path, str(key_node.value))
                lines.setdefault(key, key_node.start_mark.line + 1)
                stack.append((value_node, key))
    return lines


def read_yaml_file(path: Path) -> tuple[dict[str, Any], dict[tuple[str, ...], int]]:
    """A config file's top-level mapping and the line of each of its keys."""
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
        return {}, {}
    if not isinstance(data, dict):
        raise BadInput(
            f"config file {path} must hold a mapping of keys to values at the top level, "
            f"not a {type(data).__name__}"
        )
    return data, key_lines(text)


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
    """``obj`` (a dataclass or plain mapping) as YAML text that ``load_config`` reads back."""
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

    path = Path(path)
    atomic_write_text(path, to_yaml(obj))
    return path


__all__ = [
    "MAX_YAML_DEPTH",
    "StrictLoader",
    "config_to_dict",
    "dump_yaml",
    "key_lines",
    "load_yaml",
    "read_yaml_file",
    "to_yaml",
    "too_deep",
    "yaml_value",
]
