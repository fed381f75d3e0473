"""Hostile inputs shared by the fault tests."""

from __future__ import annotations

from typing import Any

#: one hostile line each (bytes, newline included where a writer would put one)
BAD_LINES: dict[str, bytes] = {
    "deep_array": b"[" * 200_000 + b"\n",
    "deep_object": b'{"a":' * 100_000 + b"\n",
    "deep_but_closed": b'{"id": 1, "x": ' + b"[" * 300 + b"]" * 300 + b"}\n",
    "invalid_utf8": b'{"id": 1, "text": "\xff\xfe caf\xe9"}\n',
    "lone_surrogate": b'{"id": 1, "text": "\\ud800"}\n',
    "nan": b'{"id": 1, "score": NaN}\n',
    "infinity": b'{"id": 1, "score": -Infinity}\n',
    "overflow": b'{"id": 1, "score": 1e999}\n',
    "huge_int": b'{"id": 1' + b"0" * 5000 + b"}\n",
    "not_an_object": b"[1, 2, 3]\n",
    "nul_bytes": b"\x00\x00\x00\n",
    "syntax": b'{"id": 1,, }\n',
    "truncated_last": b'{"id": 9, "text": "the writer was kil',
}


def field_paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside ``value`` (keys of objects, indexes of arrays), nested
    ones included: where a fuzzer may change or remove one field of a valid record."""
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    out: list[tuple] = []
    for key, child in items:
        out.append((*prefix, key))
        out += field_paths(child, (*prefix, key))
    return out
