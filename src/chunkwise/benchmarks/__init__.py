"""Benchmarks, one subpackage each: its loader, prompts, scorer and registration side by side.

``chunkwise.benchmarks.<name>/__init__.py`` calls :func:`register_benchmark`; the runner finds
every subpackage on first use (:func:`discover`) and asks :func:`get_benchmark` by name. Every
loader returns the one example type, :class:`Example`, in a :class:`TaskData`.
"""

from chunkwise.benchmarks.registry import (
    BENCHMARKS,
    Benchmark,
    Templates,
    checked,
    discover,
    get_benchmark,
    register_benchmark,
)
from chunkwise.benchmarks.types import Example, TaskData

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "Example",
    "TaskData",
    "Templates",
    "checked",
    "discover",
    "get_benchmark",
    "register_benchmark",
]
