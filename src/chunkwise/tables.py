"""Markdown tables, the one way chunkwise writes them (eval compare, the demo, bench scripts).

:func:`markdown_table` turns rows (lists, or dicts keyed by column) into a GitHub markdown
table: one space around each cell, the first column left-aligned and the others right-aligned
unless ``align`` says otherwise, ``|`` in a cell escaped so it stays one cell.
:func:`estimate` writes a number with its interval the way every table shows it:
``55 [35, 80]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

Row = Sequence[Any] | Mapping[str, Any]


def estimate(value: float, low: float, high: float, digits: int = 0, signed: bool = False) -> str:
    """``value [low, high]`` with ``digits`` decimals (``signed``: ``+5 [-2, +12]``, for
    differences)."""
    spec = f"{'+' if signed else ''}.{digits}f"
    return f"{value:{spec}} [{low:{spec}}, {high:{spec}}]"


def markdown_table(
    rows: Sequence[Row],
    header: Sequence[str] | None = None,
    *,
    align: str | None = None,
    missing: str = "",
) -> str:
    """A markdown table of ``rows``.

    ``header``: the column names; for rows of dicts, the keys to show (default: every key, in
    the order first seen). ``align``: one letter per column, ``l`` or ``r`` (default: the
    first column ``l``, the others ``r``: a name, then numbers). A cell that is None (or a
    key a dict row lacks) is written as ``missing``; any other value as ``str(value)``."""
    if header is None:
        if not all(isinstance(r, Mapping) for r in rows):
            raise ValueError("rows of lists need a header")
        header = list(dict.fromkeys(k for r in rows for k in r))  # type: ignore[union-attr]
    header = list(header)
    width = len(header)
    if align is None:
        align = "l" + "r" * (width - 1)
    if len(align) != width or set(align) - {"l", "r"}:
        raise ValueError(f"align {align!r}: one letter, l or r, per column ({width})")
    lines = [_line(header, missing), "|" + "".join(_rule(a) for a in align)]
    for row in rows:
        cells = [row.get(k) for k in header] if isinstance(row, Mapping) else list(row)
        if len(cells) != width:
            raise ValueError(f"a row of {len(cells)} cells under {width} columns: {cells!r}")
        lines.append(_line(cells, missing))
    return "\n".join(lines)


def _rule(align: str) -> str:
    return "---:|" if align == "r" else "---|"


def _line(cells: Sequence[Any], missing: str) -> str:
    return "| " + " | ".join(_cell(c, missing) for c in cells) + " |"


def _cell(value: Any, missing: str) -> str:
    text = missing if value is None else str(value)
    return text.replace("|", "\\|").replace("\r\n", " ").replace("\n", " ")


__all__ = ["estimate", "markdown_table"]
