"""Loading a model: a spec string becomes a ready backend.

:mod:`chunkwise.llm.spec` only parses; this module is the layer above it that knows the
packaged models. A spec whose target is an alias of a packaged adapter (``hf:default-mr``,
``vllm:default-coa``: :data:`chunkwise.llm.default_mr.PACKAGED`) is first resolved to that
adapter's folder, then the backend named by the spec's prefix builds it.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from pathlib import Path

from chunkwise.errors import BadInput
from chunkwise.llm import default_mr
from chunkwise.llm.base import LLM
from chunkwise.llm.model_defaults import ModelDefaults, folder_defaults, missing_template
from chunkwise.llm.spec import BACKENDS, ModelSpec, parse_spec
from chunkwise.llm.step_checkpoint import step_of

log = logging.getLogger(__name__)

#: backends that can load a packaged adapter by its alias
ALIAS_BACKENDS = ("hf", "vllm")


def is_alias(ms: ModelSpec) -> bool:
    """Whether ``ms`` names a packaged adapter (``hf:default-mr``) rather than a model."""
    return ms.backend in ALIAS_BACKENDS and ms.target in default_mr.PACKAGED and not ms.adapter


def resolve_alias(ms: ModelSpec) -> ModelSpec:
    """``ms`` with a packaged adapter's alias replaced by its folder (other specs unchanged)."""
    return default_mr.resolve(ms) if is_alias(ms) else ms


def load_llm(spec: str | ModelSpec, **overrides: str) -> LLM:
    """Build the backend a spec names. ``overrides`` are merged into the spec's options."""
    ms = parse_spec(spec) if isinstance(spec, str) else spec
    if overrides:
        ms = ModelSpec(ms.backend, ms.target, {**ms.options, **overrides}, ms.adapter, ms.raw)
    ms = resolve_alias(ms)
    if ms.backend in ALIAS_BACKENDS:
        warning = missing_template(Path(ms.adapter or ms.target).expanduser())
        if warning:
            log.warning("%s", warning)
    module_name, func_name = BACKENDS[ms.backend].split(":")
    loader: Callable[[ModelSpec], LLM] = getattr(importlib.import_module(module_name), func_name)
    llm = loader(ms)
    llm.spec = ms.raw
    return llm


def model_identity(spec: str) -> str:
    """What a spec loads, for caches of results: a packaged adapter's name (``hf:default-mr``)
    becomes its content-hashed folder, so a retrained adapter never reuses the old one's
    results; any other spec is itself."""
    ms = parse_spec(spec)
    if is_alias(ms):
        return f"{spec} = {Path(resolve_alias(ms).target).name}"
    return spec


def strategy_defaults(model: str) -> ModelDefaults | None:
    """The strategy options model spec ``model`` carries in its folder (a packaged adapter's,
    or a local model or training run's: :mod:`chunkwise.llm.model_defaults`), or None."""
    try:
        ms = parse_spec(model)
    except BadInput:
        return None  # loading the model will say what is wrong with it
    if is_alias(ms):
        folder = default_mr.package_dir(ms.target)
    elif ms.backend in ALIAS_BACKENDS:
        folder = Path(ms.adapter or ms.target).expanduser()
    else:
        return None
    if step_of(folder) is not None:  # a step checkpoint decodes as its run is trained to
        return folder_defaults(folder.parent.parent, finished=False)
    return folder_defaults(folder) if folder.is_dir() else None


__all__ = ["is_alias", "load_llm", "model_identity", "resolve_alias", "strategy_defaults"]
