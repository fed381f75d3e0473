"""Files that survive being killed: atomic whole-file writes and resumable JSONL appends.

* :func:`atomic_write_text` / :func:`atomic_write_json` write a temporary file next to the
  target, fsync it and ``os.replace`` it over the target: a reader sees the old file or the new
  one, never half of either.
* :func:`parse_json` is the one JSON parser for input: it turns every way a text can fail
  (bad UTF-8, syntax, nesting deeper than :data:`MAX_JSON_DEPTH`, ``NaN``/``Infinity``,
  numbers out of range) into a :class:`JSONInputError` (a ``ValueError``) with a one-line
  message, never a ``RecursionError``. :func:`read_json` reads a whole JSON file with it.
* :func:`read_jsonl` yields ``(line_number, record)`` and names ``file:line`` when a line is
  not a JSON object (or longer than :data:`MAX_LINE_BYTES`).
* :class:`JsonlAppender` is how every long loop writes its outputs: one line per record, flushed
  and fsynced as soon as it is written. Reopening the file after a crash drops a half-written
  last line and reports the ids already done, so a rerun skips them (see :func:`pending`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import tempfile
from collections.abc import Hashable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput

try:  # advisory lock against two writers on one file (POSIX only)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

# the process umask, read once, so new files get ordinary permissions rather than mkstemp's 0600
_UMASK = os.umask(0o022)
os.umask(_UMASK)


def fsync_dir(path: Path) -> None:
    """Persist a rename in ``path`` (best effort: not every platform can open a directory)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """Replace ``path`` with ``data`` atomically; parent folders are created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_UMASK
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
    return path


def atomic_write_text(path: str | Path, text: str, encoding: str = "utf-8") -> Path:
    """Replace ``path`` with ``text`` atomically; parent folders are created."""
    return atomic_write_bytes(path, text.encode(encoding))


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


def atomic_write_json(
    path: str | Path, obj: Any, *, indent: int | None = 2, sort_keys: bool = False
) -> Path:
    """Write ``obj`` as JSON (UTF-8, trailing newline) atomically.

    The object is serialised before the file is touched, so an unserialisable value leaves
    the old file as it was. Only standard JSON is written (see :func:`dumps_json`).
    """
    text = dumps_json(obj, indent=indent, sort_keys=sort_keys) + "\n"
    return atomic_write_text(path, text)


def _existing_ancestor(path: Path) -> Path:
    for parent in path.parents:
        if parent.exists():
            return parent
    return Path(".")  # pragma: no cover - a relative path always has "." above it


def check_output_file(path: str | Path, what: str = "output file") -> Path:
    """Check, before any work, that a file can be written at ``path`` later: it is not a
    folder, and the nearest existing folder above it is a writable folder (not a file).
    Raises a one-line :class:`BadInput` naming ``what``; creates nothing."""
    path = Path(path)
    if path.is_dir():
        raise BadInput(f"{what} {path} is a folder; give a file path (a new name inside it)")
    above = _existing_ancestor(path)
    if not above.is_dir():
        raise BadInput(f"{what} {path} cannot be created: {above} is a file, not a folder")
    if path.exists() and not os.access(path, os.W_OK):
        raise BadInput(f"{what} {path} is not writable")
    if not os.access(above, os.W_OK | os.X_OK):
        raise BadInput(f"{what} {path} cannot be created: {above} is not writable")
    return path


def check_output_dir(path: str | Path, what: str = "output folder") -> Path:
    """Like :func:`check_output_file` for a folder: ``path`` is a folder or can be made one."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise BadInput(f"{what} {path} is a file; give a folder")
        if not os.access(path, os.W_OK | os.X_OK):
            raise BadInput(f"{what} {path} is not writable")
        return path
    above = _existing_ancestor(path)
    if not above.is_dir():
        raise BadInput(f"{what} {path} cannot be created: {above} is a file, not a folder")
    if not os.access(above, os.W_OK | os.X_OK):
        raise BadInput(f"{what} {path} cannot be created: {above} is not writable")
    return path


def _check_readable_file(path: Path, what: str = "JSONL file") -> None:
    if not path.exists():
        raise BadInput(f"{what} {path} not found")
    if path.is_dir():
        raise BadInput(f"{path} is a directory; expected a {what}")


#: deepest nesting of arrays/objects accepted in input JSON (far below the interpreter's
#: recursion limit, so neither parsing nor later walks of a record can overflow the stack)
MAX_JSON_DEPTH = 256
#: longest JSONL line read (a longer one is a bad line, read past without holding it whole)
MAX_LINE_BYTES = 64 << 20


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
    _check_readable_file(path, what)
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]  # UTF-8 byte order mark
    try:
        return parse_json(raw)
    except JSONInputError as e:
        raise BadInput(f"{path}: not valid JSON ({e})") from None


def _parse_line(raw: bytes, allow_nan: bool = False) -> Any:
    """One line as JSON; raises :class:`JSONInputError` (a ValueError)."""
    return parse_json(raw.rstrip(b"\r\n"), allow_nan=allow_nan)


def _describe(e: Exception) -> str:
    return str(e)


def iter_lines(f: Any, limit: int | None = None) -> Iterator[tuple[int, bytes | None]]:
    """``(line_number, raw line)`` of a binary file; ``None`` for a line longer than
    ``limit`` bytes (default :data:`MAX_LINE_BYTES`), read past in pieces, never held whole."""
    limit = limit or MAX_LINE_BYTES
    lineno = 0
    while True:
        raw = f.readline(limit + 1)
        if not raw:
            return
        lineno += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):
                raw = f.readline(1 << 20)
            yield lineno, None
            continue
        yield lineno, raw


def read_jsonl(
    path: str | Path, *, skip_bad_lines: bool = False, skip_flag: str | None = None
) -> Iterator[tuple[int, dict]]:
    """Yield ``(line_number, record)`` for every JSON object line of ``path`` (1-based).

    Blank lines are skipped. A line that is not a JSON object (see :func:`parse_json`), or is
    longer than :data:`MAX_LINE_BYTES`, raises :class:`BadInput` naming ``file:line``, or is
    logged and skipped with ``skip_bad_lines=True``. ``skip_flag`` is the command-line flag
    that skips bad lines, named in the error when the command has one. A missing file or a
    directory raises at once, before the first record is asked for.
    """
    path = Path(path)
    _check_readable_file(path)
    return _iter_jsonl(path, skip_bad_lines, skip_flag)


def _iter_jsonl(
    path: Path, skip_bad_lines: bool, skip_flag: str | None = None
) -> Iterator[tuple[int, dict]]:
    hint = "Fix or delete that line" + (f", or pass {skip_flag} to skip it" if skip_flag else "")
    with path.open("rb") as f:
        for lineno, raw in iter_lines(f):
            if raw is None:
                problem = f"longer than {MAX_LINE_BYTES:,} bytes"
            else:
                if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]  # UTF-8 byte order mark
                if not raw.strip():
                    continue
                try:
                    record = _parse_line(raw)
                except ValueError as e:
                    problem = f"not valid JSON ({_describe(e)})"
                else:
                    if isinstance(record, dict):
                        yield lineno, record
                        continue
                    problem = f"a JSON {type(record).__name__}, not an object"
                if not raw.endswith(b"\n"):
                    problem += (
                        "; it is the last line and has no newline, so the writer may have "
                        "been interrupted"
                    )
            msg = f"{path}:{lineno}: {problem}"
            if not skip_bad_lines:
                raise BadInput(f"{msg}. {hint}")
            log.warning("skipping %s", msg)


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
                    record = _parse_line(raw, allow_nan=True)
                    ok = isinstance(record, dict)
                except ValueError as e:
                    ok, problem = False, f"not valid JSON ({_describe(e)})"
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


__all__ = [
    "MAX_JSON_DEPTH",
    "MAX_LINE_BYTES",
    "JSONInputError",
    "JsonlAppender",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "check_output_dir",
    "check_output_file",
    "dumps_json",
    "fsync_dir",
    "iter_lines",
    "parse_json",
    "pending",
    "read_json",
    "read_jsonl",
]
