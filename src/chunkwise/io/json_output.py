"""The one JSON serialiser for output: :func:`dumps_json` writes only standard JSON (what
:func:`~chunkwise.io.json_input.parse_json` reads back), a NaN or Infinity float becoming
``null`` with a warning."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

log = logging.getLogger(__name__)


def _finite_copy(obj: Any) -> Any:
    """``obj`` with every NaN/Infinity float replaced by ``None`` (iterative, no recursion)."""

    def fix(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            c: Any = dict(v)
        elif isinstance(v, (list, tuple)):
            c = list(v)
        else:
            return v
        todo.append(c)
        return c

    todo: list[Any] = []
    root = fix(obj)
    while todo:
        c = todo.pop()
        keys = c.keys() if isinstance(c, dict) else range(len(c))
        for k in list(keys):
            c[k] = fix(c[k])
    return root


def dumps_json(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that only writes standard JSON (what :func:`parse_json` reads back):
    a NaN or Infinity float is written as ``null``, with a warning."""
    kwargs.setdefault("ensure_ascii", False)
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError as e:
        if "Out of range float" not in str(e):
            raise
    log.warning("a NaN or infinite number was written as null (JSON has no such numbers)")
    return json.dumps(_finite_copy(obj), allow_nan=False, **kwargs)
