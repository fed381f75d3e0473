"""One LLM interface, many backends. See :mod:`chunkwise.llm.base` and :mod:`chunkwise.llm.spec`."""

from chunkwise.llm.base import LLM, Completion, GenerationParams, Request, apply_stop
from chunkwise.llm.spec import ModelSpec, load_llm, parse_spec

__all__ = [
    "LLM",
    "Completion",
    "GenerationParams",
    "ModelSpec",
    "Request",
    "apply_stop",
    "load_llm",
    "parse_spec",
]
