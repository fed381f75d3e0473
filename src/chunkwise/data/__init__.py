"""Benchmark records: readers, writers and synthetic generators."""
