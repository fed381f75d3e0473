"""Whole numbers as decimal text, of any length.

Python refuses ``int(text)`` and ``str(n)`` past 4,300 digits (``sys.set_int_max_str_digits``):
a model answer holding a longer digit run would crash a scorer that converts it. The rules
therefore compare canonical decimal strings (:func:`int_text` of the answer against
:func:`decimal` of the gold value) and never convert unbounded text; a gold answer written as
text is read with :func:`parse_int`, piece by piece.
"""

from __future__ import annotations

import re
import unicodedata

#: what ``int(text)`` accepts in base 10: surrounding whitespace, a sign, Unicode decimal
#: digits with single underscores between them (``re``'s ``\s`` and ``\d`` are int()'s sets)
_INT_TEXT = re.compile(r"\s*([+-]?)(\d+(?:_\d+)*)\s*")
#: digits converted per step: under the smallest limit Python lets a user set (640)
_PIECE = 600
_PIECE_BASE = 10**_PIECE


def int_text(text: str) -> str | None:
    """The canonical decimal text of ``int(text)`` (no leading zeros, ``-`` in front of a
    negative value), or None where ``int(text)`` rejects the text; no limit on length."""
    m = _INT_TEXT.fullmatch(text)
    if m is None:
        return None
    digits = m.group(2).replace("_", "")
    if not digits.isascii():
        digits = "".join(str(unicodedata.decimal(ch)) for ch in digits)
    digits = digits.lstrip("0") or "0"
    return "-" + digits if m.group(1) == "-" and digits != "0" else digits


def decimal(n: int) -> str:
    """``str(n)`` for an int of any size."""
    if n < 0:
        return "-" + decimal(-n)
    pieces: list[str] = []
    while n >= _PIECE_BASE:
        n, low = divmod(n, _PIECE_BASE)
        pieces.append(str(low).zfill(_PIECE))
    pieces.append(str(n))
    return "".join(reversed(pieces))


def parse_int(text: str) -> int | None:
    """``int(text)`` for base-10 text of any length; None where ``int(text)`` raises."""
    canon = int_text(text)
    if canon is None:
        return None
    digits = canon.lstrip("-")
    value = 0
    for at in range(0, len(digits), _PIECE):
        piece = digits[at : at + _PIECE]
        value = value * 10 ** len(piece) + int(piece)
    return -value if canon.startswith("-") else value


__all__ = ["decimal", "int_text", "parse_int"]
