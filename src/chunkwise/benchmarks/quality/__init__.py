"""QuALITY (Pang et al., 2022): multiple choice over long articles, from the official files.

Tasks ``quality`` (accuracy) and ``quality_hard`` (accuracy on the HARD subset).

* :mod:`.loader` — ``--data``: the official ``QuALITY.v1.0.1.htmlstripped.dev`` or its folder.
* questions — the question with its four options (:func:`chunkwise.benchmarks.queries.plain_query`).
* :mod:`.metrics` — the option a free-form reply picks, against the gold letter.

QuALITY through the shared L-Eval subset is the ``leval`` benchmark's ``quality`` task.
"""

from __future__ import annotations

from typing import Any

from chunkwise.benchmarks.queries import PROMPT_VERSION
from chunkwise.benchmarks.registry import Benchmark, register_benchmark


def build_query(task: str, example: dict[str, Any], kind: str = "chat", window: int | None = None):
    from chunkwise.benchmarks.queries import plain_query

    return plain_query(example, kind, choice=True)


def _quality() -> Benchmark:
    from chunkwise.benchmarks.quality import loader, metrics

    return Benchmark(
        name="quality",
        tasks=("quality", "quality_hard"),
        parse_data=loader.parse_data_spec,
        load=loader.load_task,
        build_query=build_query,
        score=metrics.score,
        scorers=("official",),
        extractors=("none",),
        prompt_version=lambda: PROMPT_VERSION,
        display={"quality": "QuALITY", "quality_hard": "QuALITY-HARD"},
        default_data="",
    )


register_benchmark("quality", _quality)
