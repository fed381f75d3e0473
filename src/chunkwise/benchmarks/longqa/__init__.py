"""LongQA (HELMET-style): book QA (InfiniteBench En.QA), book multiple choice (En.MC) and
NarrativeQA, as one benchmark with tasks ``en_qa``, ``en_mc`` and ``narrativeqa``.

* :mod:`.loader` — ``--data hub`` (InfiniteBench and NarrativeQA at their pinned revisions) or
  a folder of InfiniteBench's official files and NarrativeQA rows.
* :mod:`.questions` — the question as it stands, with a short answer budget.
* :mod:`.metrics` — ROUGE-L / exact match / NarrativeQA's metrics (``--scorer``).

Answer relevance (the Chow–Liu paper's metric for LongQA and NarrativeQA) needs a judge model,
so it runs over a finished run's predictions:
``python -m chunkwise.benchmarks.answer_relevance runs/NAME/predictions/TASK.jsonl --judge SPEC``.
"""

from __future__ import annotations

from chunkwise.benchmarks.registry import Benchmark, register_benchmark


def _longqa() -> Benchmark:
    from chunkwise.benchmarks.longqa import loader, metrics, questions

    return Benchmark(
        name="longqa",
        tasks=loader.TASKS,
        parse_data=loader.parse_data_spec,
        load=loader.load_task,
        build_query=questions.build_query,
        score=metrics.score,
        scorers=metrics.SCORERS,
        extractors=("none",),
        prompt_version=lambda: questions.PROMPT_VERSION,
        display=dict(loader.DISPLAY),
        default_data="hub",
    )


register_benchmark("longqa", _longqa)
