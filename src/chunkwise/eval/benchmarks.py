"""Moved to :mod:`chunkwise.benchmarks`; this name stays for code that registers or looks up a
benchmark through it."""

from chunkwise.benchmarks.registry import (
    BENCHMARKS,
    Benchmark,
    checked,
    discover,
    get_benchmark,
    register_benchmark,
)

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "checked",
    "discover",
    "get_benchmark",
    "register_benchmark",
]
