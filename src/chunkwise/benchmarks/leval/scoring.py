"""L-Eval's questions and scores: each subset is asked and scored as its own benchmark is.

``quality`` as QuALITY (the option the reply picks), ``scientific_qa`` as QASPER (answer F1),
``narrative_qa`` with one of NarrativeQA's metrics (``official`` = ROUGE-L; ``--scorer`` bleu1 |
bleu4 | meteor | rouge_l).
"""

from __future__ import annotations

from typing import Any

from chunkwise.errors import BadInput


def score_answer(task: str, prediction: str, ground_truth: Any, scorer: str = "official") -> float:
    """One prediction's score in [0, 1]; ``scorer`` picks the NarrativeQA metric (QuALITY and
    QASPER have one metric each and ignore it)."""
    if task == "quality":
        from chunkwise.benchmarks.quality.metrics import score

        return score(task, prediction, ground_truth)
    if task == "scientific_qa":
        from chunkwise.benchmarks.qasper.metrics import score

        return score(task, prediction, ground_truth)
    if task == "narrative_qa":
        from chunkwise.benchmarks.narrativeqa.metrics import narrativeqa_scores

        metric = "rouge_l" if scorer == "official" else scorer
        refs = ground_truth if isinstance(ground_truth, list) else [ground_truth]
        return narrativeqa_scores(prediction, refs, [metric])[metric]
    raise BadInput(f"unknown task {task!r}")


def build_query(task: str, example: dict[str, Any], kind: str = "chat", window: int | None = None):
    """The question as it stands; QuALITY's with its four options."""
    from chunkwise.benchmarks.queries import plain_query

    return plain_query(example, kind, choice=task == "quality")


__all__ = ["build_query", "score_answer"]
