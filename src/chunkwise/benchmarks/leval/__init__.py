"""L-Eval's long-document subsets (An et al., 2023): tasks ``quality`` (accuracy),
``scientific_qa`` (QASPER answer F1) and ``narrative_qa`` (ROUGE-L by default; ``--scorer``
bleu1 | bleu4 | meteor | rouge_l).

* :mod:`.loader` — ``--data`` (required): a folder of L-Eval files, ``<subset>.jsonl``.
* :mod:`.scoring` — each subset asked and scored as its own benchmark is (QuALITY, QASPER,
  NarrativeQA).
"""

from __future__ import annotations

from chunkwise.benchmarks.queries import PROMPT_VERSION
from chunkwise.benchmarks.registry import Benchmark, register_benchmark


def _leval() -> Benchmark:
    from chunkwise.benchmarks.leval import loader, scoring
    from chunkwise.benchmarks.narrativeqa.metrics import NARRATIVEQA_METRICS

    return Benchmark(
        name="leval",
        tasks=loader.SUBSETS,
        parse_data=loader.parse_data_spec,
        load=loader.load_task,
        build_query=scoring.build_query,
        score=lambda task, pred, gold, scorer, extract: scoring.score_answer(
            task, pred, gold, scorer
        ),
        scorers=("official", *NARRATIVEQA_METRICS),
        extractors=("none",),
        prompt_version=lambda: PROMPT_VERSION,
        display={"quality": "QuALITY", "scientific_qa": "QASPER", "narrative_qa": "NarrativeQA"},
        default_data="",
    )


register_benchmark("leval", _leval)
