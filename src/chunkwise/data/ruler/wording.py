"""The wording of the RULER tasks: ``prompts/ruler.yaml`` (needle formats and question
wording per task kind, with its version) and the display names of value kinds."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from chunkwise.config import load_yaml

#: value kinds: plural and singular display names
KIND_NAMES = {
    "numbers": ("numbers", "number"),
    "words": ("words", "word"),
    "uuids": ("UUIDs", "UUID"),
}


@cache
def templates() -> dict[str, Any]:
    """``prompts/ruler.yaml``: needle formats and question wording per task kind."""
    path = resources.files("chunkwise.prompts") / "ruler.yaml"
    return load_yaml(path.read_text(encoding="utf-8"), "prompts/ruler.yaml")


def prompt_version() -> str:
    return str(templates().get("version", "0"))
