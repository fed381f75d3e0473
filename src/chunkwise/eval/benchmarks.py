"""Moved to :mod:`chunkwise.benchmarks`; this name stays for code that registers or looks up a
benchmark through it."""

from chunkwise.benchmarks import Benchmark, get_benchmark, register_benchmark

__all__ = ["Benchmark", "get_benchmark", "register_benchmark"]
