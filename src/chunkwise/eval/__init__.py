"""Benchmark scoring: InfiniteBench metrics (official and LLM×MapReduce variants)."""
