"""Prompt sets as package data: ``<strategy>/<kind>.yaml`` with a ``defaults`` section and
per-task-family overrides. ``kind`` is ``chat`` (instruction-following models, given as chat
messages) or ``base`` (completion-style scaffolds a base model can continue)."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from chunkwise.config import load_yaml
from chunkwise.errors import BadInput


@cache
def _load_file(strategy: str, kind: str) -> dict[str, Any]:
    path = resources.files("chunkwise.prompts") / strategy / f"{kind}.yaml"
    if not path.is_file():
        raise BadInput(f"no prompt set {strategy}/{kind}.yaml in chunkwise.prompts")
    return load_yaml(path.read_text(encoding="utf-8"), f"prompts/{strategy}/{kind}.yaml")


def load_text(name: str) -> str:
    """A shared prompt fragment, e.g. ``mapreduce/calibration.txt``."""
    return (resources.files("chunkwise.prompts") / name).read_text(encoding="utf-8").strip()


def prompt_set(strategy: str, kind: str, family: str) -> dict[str, Any]:
    """The templates and settings for one strategy, model kind and task family."""
    data = _load_file(strategy, kind)
    families = data.get("families", {})
    if family not in families:
        raise BadInput(
            f"prompt set {strategy}/{kind} has no task family {family!r}; "
            f"known: {', '.join(families)}"
        )
    merged = dict(data.get("defaults", {}))
    merged.update(families[family] or {})
    merged["version"] = data.get("version", "0")
    return merged
