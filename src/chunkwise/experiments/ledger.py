"""A ledger for long benchmarks: every finished cell is one durable JSON line, written at once.

A crash loses at most the cell in flight; a rerun with the same settings reads the ledger and
skips what finished. Writing goes through :class:`~chunkwise.io.JsonlAppender` (fsync per
line, one writer per file, a line cut by a crash dropped on open, so that cell runs again).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.io import JsonlAppender, read_jsonl


def ledger_key(*parts: Any) -> str:
    """One string for what makes a cell reusable (model, options, length, n, seed, ...)."""
    return json.dumps(parts, sort_keys=True, default=str)


class Ledger:
    """Rows keyed by ``key`` in the JSON-lines file ``path``; use it as a context manager (or
    :meth:`close` it) so the file's lock is released."""

    def __init__(self, path: str | Path, *, readonly: bool = False) -> None:
        """``readonly``: read what is there without taking the writer's lock (a report while
        a run is still writing)."""
        self._app = None if readonly else JsonlAppender(path, key="key")
        self.path = Path(path) if self._app is None else self._app.path
        # a writer may be mid-line: read-only skips a cut line instead of failing on it
        rows = read_jsonl(self.path, skip_bad_lines=readonly) if self.path.exists() else []
        self.rows: dict[str, dict[str, Any]] = {}
        for line, r in rows:
            if not isinstance(r.get("key"), str):
                self.close()
                raise BadInput(
                    f"{self.path}:{line}: no 'key' text naming the cell (got "
                    f"{type(r.get('key')).__name__}); fix or delete that line"
                )
            self.rows[r["key"]] = r

    def __contains__(self, key: str) -> bool:
        return key in self.rows

    def get(self, key: str) -> dict[str, Any] | None:
        return self.rows.get(key)

    def put(self, key: str, value: dict[str, Any]) -> dict[str, Any]:
        if self._app is None:
            raise RuntimeError(f"{self.path}: this ledger was opened read-only")
        row = {"key": key, **value}
        self._app.write(row)
        self.rows[key] = row
        return row

    def close(self) -> None:
        if self._app is not None:
            self._app.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Ledger", "ledger_key"]
