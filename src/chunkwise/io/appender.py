"""Resumable JSONL appends: :class:`JsonlAppender` is how every long loop writes its outputs,
one line per record, flushed and fsynced as soon as it is written; reopening the file after a
crash drops a half-written last line and reports the ids already done, so a rerun skips them
(:func:`pending`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Hashable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.io.json_output import dumps_json
from chunkwise.io.jsonl import parse_jsonl_line

try:  # advisory lock against two writers on one file (POSIX only)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)


def _record_id(record: Any, key: str) -> Hashable:
    if isinstance(record, Mapping):
        if key not in record:
            raise KeyError(key)
        value = record[key]
    else:
        value = getattr(record, key)
    if isinstance(value, (list, dict, set)):
        raise TypeError(f"{key} must be a string or number, got {type(value).__name__}")
    return value


class JsonlAppender:
    """Append-only, kill-safe JSONL writer keyed by ``record[key]``.

    Opening reads the existing file (if any): every complete line must be a JSON object with
    ``key``; those ids land in :attr:`done`. A last line without a newline is what a crash
    mid-write leaves behind: it is dropped (the file is truncated to the last complete line)
    unless it happens to be a whole record, in which case it is kept and terminated.

    Each :meth:`write` appends one line, flushes and fsyncs before returning, so a record
    reported written survives a kill. Writing an id twice raises :class:`ValueError`. Only one
    appender may hold a file at a time (an advisory lock; a second one raises BadInput).
    """

    def __init__(self, path: str | Path, key: str = "id", *, fsync: bool = True):
        self.path = Path(path)
        self.key = key
        self.fsync = fsync
        self.done: set[Hashable] = set()
        #: records written through this appender (not counting those found on open)
        self.n_written = 0
        #: whether a partial last line was found and dropped on open
        self.recovered_partial_line = False
        if self.path.is_dir():
            raise BadInput(f"{self.path} is a directory; expected a JSONL file")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = open(self.path, "a+b")  # noqa: SIM115 - closed in close()
        try:
            self._lock()
            self._recover()
        except BaseException:
            self._f.close()
            raise

    # -- opening --------------------------------------------------------------------------

    def _lock(self) -> None:
        if fcntl is None:  # pragma: no cover
            return
        try:
            fcntl.flock(self._f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BadInput(
                f"{self.path} is already open for appending (another process or writer holds "
                "it); wait for it to finish or write to a different file"
            ) from None

    def _recover(self) -> None:
        f = self._f
        f.seek(0)
        good_end = 0  # byte offset just past the last complete, valid line
        needs_newline = False
        for lineno, raw in enumerate(f, 1):
            complete = raw.endswith(b"\n")
            if raw.strip():
                try:
                    # files older writers left may hold NaN (json.dumps' default): resumable
                    record = parse_jsonl_line(raw, allow_nan=True)
                    ok = isinstance(record, dict)
                except ValueError as e:
                    ok, problem = False, f"not valid JSON ({e})"
                else:
                    problem = "not a JSON object"
                if not ok:
                    if not complete:
                        self._drop_tail(good_end, lineno)
                        return
                    raise BadInput(
                        f"{self.path}:{lineno}: {problem}; this file cannot be resumed. Fix or "
                        "delete that line, or write to a new file"
                    )
                try:
                    rid = _record_id(record, self.key)
                except (KeyError, TypeError) as e:
                    raise BadInput(
                        f"{self.path}:{lineno}: record has no usable {self.key!r} "
                        f"({e.__class__.__name__}: {e}); every line needs one to resume"
                    ) from None
                if rid in self.done:
                    log.warning("%s:%d: id %r appears again", self.path, lineno, rid)
                self.done.add(rid)
            good_end += len(raw)
            needs_newline = not complete and bool(raw.strip())
        if needs_newline:  # a whole record whose newline was never written
            f.write(b"\n")
            self._sync()
        f.seek(0, os.SEEK_END)

    def _drop_tail(self, good_end: int, lineno: int) -> None:
        size = self._f.seek(0, os.SEEK_END)
        log.warning(
            "%s:%d: dropping a partially written last line (%d bytes) left by an interrupted run",
            self.path,
            lineno,
            size - good_end,
        )
        self._f.truncate(good_end)
        self._sync()
        self._f.seek(0, os.SEEK_END)
        self.recovered_partial_line = True

    # -- writing --------------------------------------------------------------------------

    def _sync(self) -> None:
        self._f.flush()
        if self.fsync:
            os.fsync(self._f.fileno())

    def __contains__(self, record_id: object) -> bool:
        return record_id in self.done

    def __len__(self) -> int:
        return len(self.done)

    def write(self, record: Mapping[str, Any]) -> None:
        """Append one record (must carry ``key``, not written before) and make it durable."""
        if self._f.closed:
            raise ValueError(f"{self.path}: appender is closed")
        if not isinstance(record, Mapping):
            raise TypeError(f"record must be a mapping, got {type(record).__name__}")
        try:
            rid = _record_id(record, self.key)
        except KeyError:
            raise ValueError(f"record has no {self.key!r} field: {_preview(record)}") from None
        except TypeError as e:
            raise ValueError(str(e)) from None
        if rid in self.done:
            raise ValueError(f"{self.path}: {self.key}={rid!r} was already written")
        line = dumps_json(record, separators=(",", ":")) + "\n"
        self._f.write(line.encode("utf-8"))
        self._sync()
        self.done.add(rid)
        self.n_written += 1

    def sync(self) -> None:
        """Make every record written so far durable (flush, and fsync even when the appender
        was opened with ``fsync=False`` to write a batch of records at the cost of one)."""
        if not self._f.closed:
            self._f.flush()
            os.fsync(self._f.fileno())

    def close(self) -> None:
        if not self._f.closed:
            try:
                self._sync()
            finally:
                self._f.close()  # also releases the lock

    @property
    def closed(self) -> bool:
        return self._f.closed

    def __enter__(self) -> JsonlAppender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - safety net
        f = getattr(self, "_f", None)
        if f is not None and not f.closed:
            f.close()


def _preview(record: Any, limit: int = 120) -> str:
    text = repr(record)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def pending(
    records: Iterable[Any], done_ids: Iterable[Hashable] | JsonlAppender, key: str = "id"
) -> Iterator[Any]:
    """Yield the records whose ``key`` (item or attribute) is not in ``done_ids``."""
    done = done_ids.done if isinstance(done_ids, JsonlAppender) else done_ids
    if not isinstance(done, (set, frozenset, dict)):
        done = set(done)
    for i, record in enumerate(records):
        try:
            rid = _record_id(record, key)
        except (KeyError, AttributeError, TypeError):
            raise BadInput(f"record #{i} has no usable {key!r}: {_preview(record)}") from None
        if rid not in done:
            yield record
