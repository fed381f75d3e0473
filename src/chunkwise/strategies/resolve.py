"""The options a strategy runs with for one model: the user's explicit options over the
options the model carries (its ``strategy.json``: :mod:`chunkwise.llm.model_defaults`), each
converted by its declared type and recorded with where it came from.

``chunkwise eval`` and ``chunkwise answer`` both build their strategy here, so
``--model hf:default-mr --strategy mapreduce`` decodes the way the adapter was trained and
measured (500-token chunks, grounding, ...), and results.json says which option came from
the model and which from the user.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chunkwise.config import config_to_dict
from chunkwise.llm.loading import strategy_defaults
from chunkwise.options import convert_options
from chunkwise.strategies.base import Strategy, strategy_class

#: the source of an option the user gave
USER = "user"


@dataclass(frozen=True)
class ResolvedOptions:
    """A strategy's name, the options it is built with, and where each option came from
    (``user`` or ``model: <file>``)."""

    strategy: str
    options: dict[str, Any]
    sources: dict[str, str]

    def build(self) -> Strategy:
        return strategy_class(self.strategy)(**self.options)

    def record(self) -> dict[str, Any]:
        """For results.json: ``{"options": {...}, "option_sources": {...}}``."""
        return {"options": config_to_dict(self.options), "option_sources": dict(self.sources)}


def resolve_options(strategy: str, model: str, user: Mapping[str, Any]) -> ResolvedOptions:
    """``user``'s options (text or values) over those ``model`` carries for ``strategy``."""
    cls = strategy_class(strategy)
    defaults = strategy_defaults(model)
    carried: dict[str, Any] = {}
    sources: dict[str, str] = {}
    if defaults is not None:
        given = {k: v for k, v in defaults.for_strategy(strategy).items() if k not in user}
        carried = convert_options(f"{defaults.source}: strategy {strategy!r}", cls, given)
        sources = {k: f"model: {defaults.source}" for k in carried}
    options = {**carried, **convert_options(f"strategy {strategy!r}", cls, user)}
    sources.update({k: USER for k in user})
    return ResolvedOptions(strategy, options, sources)


__all__ = ["USER", "ResolvedOptions", "resolve_options"]
