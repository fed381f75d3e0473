"""Strategies for answering a question about a long document, as registered peers.

``get_strategy(name, **options).answer(document, query, llm) -> Answer``
"""

from chunkwise.strategies import chain_of_agents, mapreduce, standard  # noqa: F401  (register)
from chunkwise.strategies import dtcrs, raptor, retrieval  # noqa: F401  (register)
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
)

__all__ = [
    "STRATEGIES",
    "Answer",
    "Query",
    "Stats",
    "Strategy",
    "TraceEvent",
    "get_strategy",
    "parse_strategy_args",
    "register",
]
