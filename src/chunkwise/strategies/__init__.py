"""Strategies for answering a question about a long document, as registered peers.

``get_strategy(name, **options).answer(document, query, llm) -> Answer``
"""

# Importing each strategy module registers it.
from chunkwise.strategies import (  # noqa: F401
    chain_of_agents,
    dtcrs,
    mapreduce,
    raptor,
    retrieval,
    standard,
)
from chunkwise.strategies.base import (
    STRATEGIES,
    Answer,
    Query,
    Stats,
    Strategy,
    TraceEvent,
    get_strategy,
    parse_strategy_args,
    register,
    strategy_class,
)
from chunkwise.strategies.resolve import ResolvedOptions, resolve_options

__all__ = [
    "STRATEGIES",
    "Answer",
    "Query",
    "ResolvedOptions",
    "Stats",
    "Strategy",
    "TraceEvent",
    "get_strategy",
    "parse_strategy_args",
    "register",
    "resolve_options",
    "strategy_class",
]
