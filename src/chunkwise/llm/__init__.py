"""One LLM interface, many backends. See :mod:`chunkwise.llm.base`,
:mod:`chunkwise.llm.spec` (parsing) and :mod:`chunkwise.llm.loading` (specs to backends)."""

from chunkwise.llm.base import LLM, Completion, GenerationParams, Request, apply_stop
from chunkwise.llm.loading import load_llm
from chunkwise.llm.spec import ModelSpec, parse_spec

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
