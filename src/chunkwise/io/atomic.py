"""Whole-file writes that survive being killed: :func:`atomic_write_bytes` (and its text and
JSON forms) writes a temporary file next to the target, fsyncs it and ``os.replace``-s it over
the target, so a reader sees the old file or the new one, never half of either;
:func:`fsync_dir` makes such a rename itself durable."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

from chunkwise.io.json_output import dumps_json

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


def atomic_write_json(
    path: str | Path, obj: Any, *, indent: int | None = 2, sort_keys: bool = False
) -> Path:
    """Write ``obj`` as JSON (UTF-8, trailing newline) atomically.

    The object is serialised before the file is touched, so an unserialisable value leaves
    the old file as it was. Only standard JSON is written (see :func:`dumps_json`).
    """
    text = dumps_json(obj, indent=indent, sort_keys=sort_keys) + "\n"
    return atomic_write_text(path, text)
