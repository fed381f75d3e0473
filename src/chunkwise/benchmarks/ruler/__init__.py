"""RULER-style synthetic tasks as the registered ``ruler`` benchmark.

Tasks (RULER's names; what each hides and asks: :mod:`chunkwise.data.ruler`):
``niah_single_1``/``_2``/``_3``, ``niah_multikey_1``/``_2``/``_3``, ``niah_multivalue``,
``niah_multiquery``, ``vt``, ``cwe``, ``fwe``; ``--tasks all``: every task (for a folder,
every task it has a file for).

``--data``: ``synthetic:LENGTH`` (``4096``, ``32k``, ``128K``, ``1m``: contexts of LENGTH tokens
of the reading model's tokenizer, ``--limit`` examples, default 20, from ``--seed``), or a
folder of JSONL files written by ``chunkwise generate-data --task ruler_<task>``, named
``<task>.jsonl`` or ``ruler_<task>.jsonl``.

Scorers (``--scorer``), on the prediction stripped and with control characters turned into
newlines as RULER's ``postprocess_pred`` does, case-insensitive substring match:

* ``all`` — RULER's ``string_match_all``: the fraction of expected strings present;
* ``part`` — RULER's ``string_match_part``: 1 when any expected string is present;
* ``official`` — RULER's metric for the task: ``all`` for every synthetic task (RULER keeps
  ``part`` for its QA tasks).

Questions come from ``prompts/ruler.yaml``: chat models get an instruction, base models a
question and the answer's opening words to continue (RULER's ``answer_prefix``), with
RULER's output budget per task kind. Importing this package registers the benchmark.
"""

from __future__ import annotations

from typing import Any

from chunkwise.benchmarks.registry import Benchmark, register_benchmark

DISPLAY = {
    "niah_single_1": "NIAH single 1",
    "niah_single_2": "NIAH single 2",
    "niah_single_3": "NIAH single 3",
    "niah_multikey_1": "NIAH multikey 1",
    "niah_multikey_2": "NIAH multikey 2",
    "niah_multikey_3": "NIAH multikey 3",
    "niah_multivalue": "NIAH multivalue",
    "niah_multiquery": "NIAH multiquery",
    "vt": "Variable tracking",
    "cwe": "Common words",
    "fwe": "Frequent words",
}


def _ruler() -> Benchmark:
    from chunkwise.benchmarks.ruler import loader, metrics, questions
    from chunkwise.data import ruler

    def score(task: str, prediction: str, ground_truth: Any, scorer: str, extract: str) -> float:
        return metrics.score(task, prediction, ground_truth, scorer)

    return Benchmark(
        name="ruler",
        tasks=tuple(ruler.TASKS),
        parse_data=loader.parse_data_spec,
        load=loader.load_task,
        build_query=questions.build_query,
        score=score,
        scorers=metrics.SCORERS,
        extractors=("none",),
        prompt_version=ruler.prompt_version,
        display=dict(DISPLAY),
        default_data="synthetic:4096",
        available_tasks=loader.available_tasks,
        task_config=questions.task_config,
    )


register_benchmark("ruler", _ruler)
