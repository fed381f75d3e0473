"""A parsed ``--data`` value of the benchmarks that read the Hub, a local folder or generate
their examples: ``hub``, a folder, or ``synthetic:LENGTH`` (InfiniteBench, RULER, LongQA).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from chunkwise.errors import BadInput


@dataclass(frozen=True)
class DataSpec:
    """A parsed ``--data`` value; the runner loads the model first when ``needs_tokenizer``."""

    kind: str  # hub | local | synthetic
    path: Path | None = None
    length: int | None = None

    @property
    def needs_tokenizer(self) -> bool:
        return self.kind == "synthetic"


_LENGTH = re.compile(r"(\d+)\s*([kKmM]?)")


def synthetic_length(data: str) -> int:
    """The token count of a ``synthetic:LENGTH`` ``--data`` value (``4096``, ``4k``, ``1m``)."""
    m = _LENGTH.fullmatch(data.strip().partition(":")[2].strip())
    if not m:
        raise BadInput(
            f"--data {data!r}: expected synthetic:LENGTH with LENGTH in tokens, "
            "e.g. synthetic:4096 or synthetic:128k"
        )
    length = int(m.group(1)) * {"": 1, "k": 1024, "m": 1024 * 1024}[m.group(2).lower()]
    if length <= 0:
        raise BadInput(f"--data {data!r}: the length must be positive")
    return length


def parse_data(data: str) -> DataSpec | None:
    """``hub``, ``synthetic:LENGTH`` or an existing folder as a :class:`DataSpec`; None for
    anything else (the benchmark then says what its ``--data`` takes)."""
    text = (data or "").strip()
    if text == "hub":
        return DataSpec("hub")
    if text.startswith("synthetic:"):
        return DataSpec("synthetic", length=synthetic_length(data))
    path = Path(text).expanduser()
    if text and path.is_dir():
        return DataSpec("local", path=path)
    return None


__all__ = ["DataSpec", "parse_data", "synthetic_length"]
