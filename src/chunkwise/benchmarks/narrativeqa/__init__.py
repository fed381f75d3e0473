"""NarrativeQA over full stories (Kočiský et al., 2018), task ``narrativeqa``.

* :mod:`.loader` — ``--data hub``, ``hub:SPLIT`` or a local folder/file, optionally
  ``?min_words=N``.
* :mod:`.metrics` — BLEU-1, BLEU-4, METEOR (WordNet from local files: :mod:`.wordnet`) and
  ROUGE-L, as AllenNLP's script computes them.

Asked and scored as LongQA's open questions (:mod:`chunkwise.benchmarks.longqa.questions`,
:mod:`chunkwise.benchmarks.longqa.metrics`: ``--scorer`` official = ROUGE-L, exact_match,
rouge_l, bleu1, bleu4, meteor).
"""

from __future__ import annotations

from chunkwise.benchmarks.registry import Benchmark, register_benchmark


def _narrativeqa() -> Benchmark:
    from chunkwise.benchmarks.longqa import metrics, questions
    from chunkwise.benchmarks.narrativeqa import loader

    return Benchmark(
        name="narrativeqa",
        tasks=("narrativeqa",),
        parse_data=loader.parse_data_spec,
        load=loader.load_task,
        build_query=questions.build_query,
        score=metrics.score,
        scorers=metrics.SCORERS,
        extractors=("none",),
        prompt_version=lambda: questions.PROMPT_VERSION,
        display={"narrativeqa": "NarrativeQA"},
        default_data="hub",
    )


register_benchmark("narrativeqa", _narrativeqa)
