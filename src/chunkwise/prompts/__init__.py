"""Prompt sets as package data: ``<strategy>/<kind>.yaml`` with a ``defaults`` section and
per-task-family overrides. ``kind`` is ``chat`` (instruction-following models, given as chat
messages) or ``base`` (completion-style scaffolds a base model can continue). A benchmark's
own question wording lives in its package (``chunkwise.benchmarks.<name>``), read with the
same :func:`load_prompt_file`."""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any

from chunkwise.config import load_yaml
from chunkwise.errors import BadInput


def load_prompt_file(package: str, name: str) -> dict[str, Any]:
    """A YAML prompt file shipped as package data: ``name`` (``mapreduce/chat.yaml``) inside
    ``package`` (``chunkwise.prompts``, or a benchmark's own package)."""
    path = resources.files(package) / name
    if not path.is_file():
        raise BadInput(f"no prompt set {name} in {package}")
    where = package.removeprefix("chunkwise.").replace(".", "/") + "/" + name
    return load_yaml(path.read_text(encoding="utf-8"), where)


@cache
def _load_file(strategy: str, kind: str) -> dict[str, Any]:
    return load_prompt_file("chunkwise.prompts", f"{strategy}/{kind}.yaml")


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
