"""Reading JSONL: :func:`read_jsonl` yields ``(line_number, record)`` and names ``file:line``
when a line is not a JSON object or is longer than :data:`MAX_LINE_BYTES` (an error, or a
warning and a skip); :func:`iter_lines` reads a binary file line by line without ever holding
an over-long line whole."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.io.json_input import parse_json
from chunkwise.io.paths import check_readable_file

log = logging.getLogger(__name__)

#: longest JSONL line read (a longer one is a bad line, read past without holding it whole)
MAX_LINE_BYTES = 64 << 20


def parse_jsonl_line(raw: bytes, allow_nan: bool = False) -> Any:
    """One line as JSON; raises :class:`~chunkwise.io.json_input.JSONInputError` (a
    ValueError)."""
    return parse_json(raw.rstrip(b"\r\n"), allow_nan=allow_nan)


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
    check_readable_file(path)
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
                    record = parse_jsonl_line(raw)
                except ValueError as e:
                    problem = f"not valid JSON ({e})"
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
