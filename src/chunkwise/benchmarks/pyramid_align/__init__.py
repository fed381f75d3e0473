"""Pyramid-Align records as a benchmark: score a model on synthesized questions it never saw.

``--benchmark pyramid_align --tasks qa --data PATH`` (:mod:`.loader`). The reference answers
are the synthesis teacher's MapReduce answers, so the score measures agreement with that
teacher, not human-judged correctness. Asked and scored as NarrativeQA's open questions
(:mod:`chunkwise.benchmarks.longqa.questions` and ``.metrics``: ROUGE-L F1 by default,
``exact_match`` as an option).

The demo holds whole documents out of training and evaluates on their questions this way.
"""

from __future__ import annotations

from typing import Any

from chunkwise.benchmarks.registry import Benchmark, register_benchmark

PROMPT_VERSION = "pyramid-align-qa-1"


def _pyramid_align() -> Benchmark:
    from chunkwise.benchmarks.longqa import metrics, questions
    from chunkwise.benchmarks.pyramid_align import loader

    def build_query(task: str, example: dict[str, Any], kind: str = "chat", window=None):
        return questions.build_query("narrativeqa", example, kind, window)  # the same wording

    def score(task: str, prediction: str, ground_truth: Any, scorer: str, extract: str) -> float:
        return metrics.score("narrativeqa", prediction, ground_truth, scorer)

    return Benchmark(
        name="pyramid_align",
        tasks=loader.TASKS,
        parse_data=loader.parse_data_spec,
        load=loader.load_task,
        build_query=build_query,
        score=score,
        scorers=metrics.SCORERS,
        extractors=("none",),
        prompt_version=lambda: PROMPT_VERSION,
        display={"qa": "held-out Pyramid-Align QA"},
        default_data="",
    )


register_benchmark("pyramid_align", _pyramid_align)
