"""The one JSON parser for input: :func:`parse_json` turns every way a text can fail (bad
UTF-8, syntax, nesting deeper than :data:`MAX_JSON_DEPTH`, ``NaN``/``Infinity``, numbers out of
range, half a surrogate pair) into a :class:`JSONInputError` (a ``ValueError``) with a
one-line message, never a ``RecursionError``; :func:`read_json` reads a whole JSON file
with it."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.io.paths import check_readable_file

#: deepest nesting of arrays/objects accepted in input JSON (far below the interpreter's
#: recursion limit, so neither parsing nor later walks of a record can overflow the stack)
MAX_JSON_DEPTH = 256


class JSONInputError(ValueError):
    """Input that is not acceptable JSON; ``str()`` is a one-line reason (no location)."""


def _reject_constant(name: str) -> Any:
    raise JSONInputError(f"{name} is not valid JSON (only finite numbers are)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONInputError(f"number {text[:40]} is out of range")
    return value


#: a \\u escape of a UTF-16 surrogate: only a whole pair is a character
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def _has_lone_surrogate(obj: Any) -> bool:
    """Whether a string (or key) in ``obj`` holds half a surrogate pair, which no UTF-8 file
    can store (writing it later would fail)."""
    stack = [obj]
    while stack:
        node = stack.pop()
        items = [node] if isinstance(node, str) else []
        if isinstance(node, dict):
            items = list(node)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        for text in items:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def _too_deep(obj: Any, limit: int) -> bool:
    """Whether ``obj`` nests arrays/objects deeper than ``limit`` (iterative: no recursion)."""
    stack = [(obj, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1) for c in children if isinstance(c, (dict, list)))
    return False


def parse_json(data: str | bytes, *, allow_nan: bool = False) -> Any:
    """Parse one JSON text (bytes must be UTF-8); raise :class:`JSONInputError` on anything
    unusable: bad UTF-8, bad syntax, nesting deeper than :data:`MAX_JSON_DEPTH`, and (unless
    ``allow_nan``) ``NaN``, ``Infinity`` or numbers that overflow to them."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise JSONInputError(f"not UTF-8 (byte {e.start}: {e.reason})") from None
    extra: dict[str, Any] = (
        {}
        if allow_nan
        else {
            "parse_constant": _reject_constant,
            "parse_float": _finite_float,
        }
    )
    try:
        obj = json.loads(data, **extra)
    except JSONInputError:
        raise
    except json.JSONDecodeError as e:
        where = f"line {e.lineno} column {e.colno}" if e.lineno > 1 else f"column {e.colno}"
        raise JSONInputError(f"{e.msg} at {where}") from None
    except RecursionError:
        raise JSONInputError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    except ValueError as e:  # e.g. an integer with more digits than Python converts
        raise JSONInputError(str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    nested = isinstance(obj, (dict, list))
    if (
        nested
        and data.count("[") + data.count("{") > MAX_JSON_DEPTH
        and _too_deep(obj, MAX_JSON_DEPTH)
    ):
        raise JSONInputError(f"nested deeper than {MAX_JSON_DEPTH} levels")
    if _SURROGATE_ESCAPE.search(data) and _has_lone_surrogate(obj):
        raise JSONInputError("a \\u escape is half a surrogate pair (not a character)")
    return obj


def read_json(path: str | Path, what: str = "JSON file") -> Any:
    """The JSON value in ``path``; any problem is a one-line :class:`BadInput` naming it."""
    path = Path(path)
    check_readable_file(path, what)
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]  # UTF-8 byte order mark
    try:
        return parse_json(raw)
    except JSONInputError as e:
        raise BadInput(f"{path}: not valid JSON ({e})") from None
