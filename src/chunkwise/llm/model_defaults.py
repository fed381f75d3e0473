"""The decoding options a model carries: how it was trained and measured to be decoded.

A model can name the strategy options it goes with, per strategy, in a ``strategy.json``
beside its weights (``{"mapreduce": {"chunk_tokens": 500, "grounding": true, ...}}``):

- a packaged adapter (``hf:default-mr``, ``vllm:default-coa``): the ``strategy.json`` that
  ``make default-mr`` installed beside it;
- a model folder (``hf:/path``, ``vllm:/path`` or the bare path): its own ``strategy.json``;
  failing that, a finished training run's ``recipe.yaml``: a run trained on MapReduce records
  (``data.mode: mapreduce``) carries its ``data.mapreduce`` options and ``data.window``, what
  those records were rendered with.

:func:`folder_defaults` reads a folder's; :func:`chunkwise.llm.loading.strategy_defaults`
finds the folder a spec loads; :func:`chunkwise.strategies.resolve_options` puts the user's
explicit options over them. Any other model carries none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunkwise.config import load_yaml
from chunkwise.errors import BadInput
from chunkwise.io import parse_json

#: the file beside a model that holds its strategy options
STRATEGY_FILE = "strategy.json"
#: a training run's resolved recipe, and its summary, beside its weights or adapter
RECIPE_FILE = "recipe.yaml"
TRAIN_INFO_FILE = "train_info.json"


@dataclass(frozen=True)
class ModelDefaults:
    """Strategy options per strategy name, and the file they were read from."""

    source: str
    options: dict[str, dict[str, Any]] = field(default_factory=dict)

    def for_strategy(self, name: str) -> dict[str, Any]:
        return dict(self.options.get(name, {}))


def recipe_strategy_options(recipe: Any, source: object) -> dict[str, dict[str, Any]]:
    """The MapReduce options a training recipe (as read from YAML) rendered its records with:
    ``{"mapreduce": {**data.mapreduce, "window": data.window}}``."""
    data = recipe.get("data") if isinstance(recipe, dict) else None
    data = {} if data is None else data
    mapreduce = data.get("mapreduce") if isinstance(data, dict) else None
    window = data.get("window", 4096) if isinstance(data, dict) else None
    if not isinstance(mapreduce, (dict, type(None))) or type(window) is not int:
        raise BadInput(
            f"{source}: not a training recipe (data.mapreduce must be a mapping and "
            "data.window a whole number)"
        )
    return {"mapreduce": {**(mapreduce or {}), "window": window}}


def read_strategy_file(path: Path) -> dict[str, dict[str, Any]]:
    """A ``strategy.json``: strategy name -> options (a mapping of mappings)."""
    try:  # parse_json: deep nesting is a ValueError too, never a RecursionError
        data = parse_json(path.read_bytes())
    except (OSError, ValueError) as e:
        raise BadInput(f"{path}: cannot be read as JSON ({e})") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, dict) for k, v in data.items()
    ):
        raise BadInput(
            f"{path}: expected strategy names mapped to their options, e.g. "
            '{"mapreduce": {"chunk_tokens": 500}}'
        )
    return {k: dict(v) for k, v in data.items()}


def read_recipe(path: Path) -> Any:
    """A training run's ``recipe.yaml`` as plain data (None when it is empty)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: cannot be read ({e})") from None
    return load_yaml(text, path)


def folder_defaults(folder: Path, *, finished: bool = True) -> ModelDefaults | None:
    """The strategy options a model folder carries: its ``strategy.json``, else (a finished
    training run on MapReduce records) its ``recipe.yaml``'s; None when it carries none.
    ``finished=False``: a run still training counts too (its step checkpoints)."""
    path = folder / STRATEGY_FILE
    if path.is_file():
        return ModelDefaults(str(path), read_strategy_file(path))
    recipe = folder / RECIPE_FILE
    if not (recipe.is_file() and (not finished or (folder / TRAIN_INFO_FILE).is_file())):
        return None
    data = read_recipe(recipe)
    section = data.get("data") if isinstance(data, dict) else None
    if not isinstance(section, dict) or section.get("mode") != "mapreduce":
        return None  # trained on standard prompts: no MapReduce options to carry
    return ModelDefaults(str(recipe), recipe_strategy_options(data, recipe))


#: a chat template setting that names no template of the run's own
_NO_OWN_TEMPLATE = ("", "auto", "none")


def _trained_template(folder: Path) -> str | None:
    """The chat template a training run in ``folder`` was told to use (``model.chat_template``
    of a run trained on chat prompts), or None: no run's summary here, "auto" (the base
    tokenizer's own) or base prompts."""
    try:
        info = parse_json((folder / TRAIN_INFO_FILE).read_bytes(), allow_nan=True)
    except (OSError, ValueError):
        return None
    recipe = info.get("recipe") if isinstance(info, dict) else None
    model = recipe.get("model") if isinstance(recipe, dict) else None
    data = recipe.get("data") if isinstance(recipe, dict) else None
    template = model.get("chat_template") if isinstance(model, dict) else None
    if not isinstance(template, str) or template.strip().lower() in _NO_OWN_TEMPLATE:
        return None
    if not isinstance(data, dict) or data.get("prompts") != "chat":
        return None
    return template


def _has_chat_template(folder: Path) -> bool:
    if (folder / "chat_template.jinja").is_file():
        return True
    try:
        config = parse_json((folder / "tokenizer_config.json").read_bytes())
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and bool(config.get("chat_template"))


def missing_template(folder: Path) -> str | None:
    """A warning when ``folder`` is a training run's output that was trained under a chat
    template of its own but holds none: copied without the tokenizer files its run wrote, it
    would be decoded under the base model's template (or none), not the one it learned."""
    template = _trained_template(folder)
    if template is None or _has_chat_template(folder):
        return None
    return (
        f"{folder}: trained on chat prompts under chat template {template!r} "
        f"({TRAIN_INFO_FILE}), but the folder holds no chat template "
        "(chat_template.jinja or tokenizer_config.json): it is decoded under the base "
        "model's template instead. Copy the tokenizer files its training run wrote beside "
        "the adapter."
    )


__all__ = [
    "RECIPE_FILE",
    "STRATEGY_FILE",
    "ModelDefaults",
    "folder_defaults",
    "missing_template",
    "read_recipe",
    "read_strategy_file",
    "recipe_strategy_options",
]
