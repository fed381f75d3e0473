"""Generated documents with ground truth as a benchmark: the document families of
:mod:`chunkwise.data.families` (passkey, kv_retrieval, multi-hop chains, conflicting evidence,
extractive QA over real text, ...), scored by each family's own rule against its known answer.

``--benchmark generated --tasks passkey,kv_retrieval --data heldout:4000 --limit 20`` reads 20
documents per family of about 4,000 tokens, built from the held-out seeds (``HELDOUT_SEED +
length``, the seeds ``bench/mr_trained.py`` reads and no training recipe writes);
``train:4000`` builds from the training seed instead (for checking what a model was taught).
Both are worded with the training templates (``data/families/wordings.yaml``);
``heldout-templates:4000`` reads the same held-out documents worded only with held-out
templates, which no training record uses: the seen and the held-out-template cells, paired
document by document.
Every reference is the generator's ground truth, never a model's output. The question reaches
the strategy exactly as the oracle teacher and ``bench/mr_trained.py`` ask it
(:meth:`Doc.query`), so a model trained on oracle records is asked in the words it learned.

* :mod:`.loader` — ``--data heldout:LENGTH | heldout-templates:LENGTH | train:LENGTH``, the
  documents as examples.
* :mod:`.family` — each example asked and scored through its family.
"""

from __future__ import annotations

from chunkwise.benchmarks.registry import Benchmark, register_benchmark

#: generated-2: questions and evidence worded by templates (issue #49)
PROMPT_VERSION = "generated-2"


def _generated() -> Benchmark:
    from chunkwise.benchmarks.generated import family, loader

    return Benchmark(
        name="generated",
        tasks=loader.TASKS,
        parse_data=loader.parse_data_spec,
        load=loader.load_task,
        build_query=family.build_query,
        score=family.score,
        scorers=("official",),  # each family's own rule (Family.score)
        extractors=("none",),
        prompt_version=lambda: PROMPT_VERSION,
        display={t: t.replace("_", " ") for t in loader.TASKS},
        default_data="heldout:4000",
    )


register_benchmark("generated", _generated)
