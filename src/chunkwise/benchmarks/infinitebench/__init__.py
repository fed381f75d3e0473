"""InfiniteBench (Zhang et al., 2024): 12 tasks over 100K+ token documents.

* :mod:`.loader` — the examples, from the Hub at a pinned revision, a folder of the official
  ``<task>.jsonl`` files, or ``synthetic:LENGTH`` (five tasks, generated offline).
* :mod:`.questions` — each task's question in our wording (``prompts.yaml``) or, with
  ``--prompt-source``, the official templates (:mod:`.templates`).
* :mod:`.metrics` — the scorers (``official``, ``lenient``: :mod:`.rules`), on gold answers in
  each task's native type (:mod:`.labels`), after an answer extractor (:mod:`.extractors`).
"""

from __future__ import annotations

from typing import Any

from chunkwise.benchmarks.registry import Benchmark, register_benchmark

#: tasks whose gold answer is a value the document states verbatim: their evidence is where
#: it occurs (the rest give none: unknown)
LOCATED_TASKS = ("passkey", "number_string", "kv_retrieval", "math_find")


def evidence(task: str, example: dict[str, Any]) -> list[tuple[int, int]] | None:
    """Where the gold value occurs in the document (retrieval tasks, math_find), else None."""
    from chunkwise.benchmarks.evidence import located_answer

    return located_answer(task, example) if task in LOCATED_TASKS else None


def _infinitebench() -> Benchmark:
    from chunkwise.benchmarks.infinitebench import (
        extractors,
        loader,
        metrics,
        questions,
        templates,
    )

    def score(task: str, prediction: str, ground_truth: Any, scorer: str, extract: str) -> float:
        text = metrics.EXTRACTORS[extract](task, prediction)
        return metrics.score_one(task, text, ground_truth, scorer)

    def available(spec: Any) -> tuple[str, ...]:
        return loader.SYNTHETIC_TASKS if spec.kind == "synthetic" else tuple(metrics.TASKS)

    return Benchmark(
        name="infinitebench",
        tasks=tuple(metrics.TASKS),
        parse_data=loader.parse_data_spec,
        load=loader.load_task,
        build_query=questions.build_query,
        score=score,
        scorers=tuple(metrics.SCORERS),
        extractors=tuple(metrics.EXTRACTORS),
        prompt_version=questions.prompt_version,
        display=dict(loader.DISPLAY_NAMES),
        default_data="hub",
        available_tasks=available,
        load_templates=templates.load_templates,
        extract_answer=lambda task, text, extract: metrics.EXTRACTORS[extract](task, text),
        task_config=questions.task_config,
        resolve_extract=extractors.resolve_extract,
        reads_raw=extractors.reads_raw,
        answer_markers=extractors.ANSWER_MARKERS,
        hub_revision=loader.HUB_REVISION,
        evidence=evidence,
    )


register_benchmark("infinitebench", _infinitebench)
