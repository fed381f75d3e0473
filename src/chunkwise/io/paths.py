"""Path checks made before any work, each a one-line :class:`~chunkwise.errors.BadInput`:
:func:`check_output_file` and :func:`check_output_dir` make sure an output can be written
later (creating nothing), :func:`check_readable_file` that an input file is there and is a
file."""

from __future__ import annotations

import os
from pathlib import Path

from chunkwise.errors import BadInput


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


def check_readable_file(path: Path, what: str = "JSONL file") -> None:
    """Raise :class:`BadInput` if ``path`` is missing or a directory (``what`` names it)."""
    if not path.exists():
        raise BadInput(f"{what} {path} not found")
    if path.is_dir():
        raise BadInput(f"{path} is a directory; expected a {what}")
