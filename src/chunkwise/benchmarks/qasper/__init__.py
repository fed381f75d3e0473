"""QASPER (Dasigi et al., 2021): questions over NLP papers, task ``qasper``.

* :mod:`.loader` — ``--data``: the official JSON file, a folder holding it, a JSON-lines file
  in the Hugging Face layout, or ``hub:REPO@REVISION[:SPLIT]``.
* questions — the example's question as it stands (:func:`chunkwise.benchmarks.queries.plain_query`).
* :mod:`.metrics` — answer F1 over the official references (the one scorer, ``official``).
"""

from __future__ import annotations

from typing import Any

from chunkwise.benchmarks.queries import PROMPT_VERSION
from chunkwise.benchmarks.registry import Benchmark, register_benchmark


def build_query(task: str, example: dict[str, Any], kind: str = "chat", window: int | None = None):
    from chunkwise.benchmarks.queries import plain_query

    return plain_query(example, kind, choice=False)


def _qasper() -> Benchmark:
    from chunkwise.benchmarks import evidence
    from chunkwise.benchmarks.qasper import loader, metrics

    return Benchmark(
        name="qasper",
        tasks=("qasper",),
        parse_data=loader.parse_data_spec,
        load=loader.load_task,
        build_query=build_query,
        score=metrics.score,
        scorers=("official",),
        extractors=("none",),
        prompt_version=lambda: PROMPT_VERSION,
        display={"qasper": "QASPER"},
        evidence=evidence.located_extractive,  # where an extractive answer occurs verbatim
        default_data="",
    )


register_benchmark("qasper", _qasper)
