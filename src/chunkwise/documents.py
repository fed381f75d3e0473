"""Reading user documents with errors that name the input."""

from __future__ import annotations

from pathlib import Path

from chunkwise.errors import BadInput


def read_document(path: str | Path, *, allow_empty: bool = False) -> str:
    """Read a UTF-8 text file; raise :class:`BadInput` naming the path on any problem."""
    p = Path(path)
    if not p.exists():
        raise BadInput(f"{path}: no such file")
    if p.is_dir():
        raise BadInput(f"{path}: is a directory, expected a text file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise BadInput(f"{path}: not UTF-8 text (byte {e.start}: {e.reason})") from None
    except OSError as e:
        raise BadInput(f"{path}: cannot read ({e.strerror})") from None
    if not allow_empty and not text.strip():
        raise BadInput(f"{path}: the document is empty")
    return text
