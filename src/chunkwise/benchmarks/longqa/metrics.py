"""LongQA's scorers (also NarrativeQA's and Pyramid-Align's, which ask open questions too).

``official`` = ROUGE-L F1 for the open questions and exact match of the option letter for
``en_mc``; ``exact_match`` (SQuAD-normalised, max over references; the letter for ``en_mc``);
``rouge_l``; and NarrativeQA's other metrics for open questions, ``bleu1``, ``bleu4`` and
``meteor`` (max over references; METEOR needs the offline WordNet from ``make install``, see
:mod:`chunkwise.benchmarks.narrativeqa.wordnet`).
"""

from __future__ import annotations

from typing import Any

from chunkwise.benchmarks.narrativeqa.metrics import narrativeqa_scores, rouge_l
from chunkwise.benchmarks.qa_metrics import normalize_answer
from chunkwise.benchmarks.quality.metrics import quality_correct
from chunkwise.errors import BadInput

SCORERS = ("official", "exact_match", "rouge_l", "bleu1", "bleu4", "meteor")
#: scorers that are one of NarrativeQA's metrics (open questions only)
NARRATIVEQA_SCORERS = ("bleu1", "bleu4", "meteor")


def exact_match(prediction: str, references: list[str]) -> float:
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(r) for r in references))


def rouge_l_f1(prediction: str, references: list[str]) -> float:
    return max((rouge_l(prediction, r) for r in references), default=0.0)


def score(
    task: str, prediction: str, ground_truth: Any, scorer: str = "official", extract: str = "none"
) -> float:
    """One prediction's score in [0, 1]."""
    if scorer not in SCORERS:
        raise BadInput(f"unknown scorer {scorer!r}; valid: {', '.join(SCORERS)}")
    prediction = prediction if isinstance(prediction, str) else ""
    if task == "en_mc":
        if not isinstance(ground_truth, dict) or "letter" not in ground_truth:
            raise BadInput(f"en_mc: ground truth {ground_truth!r} has no option letter")
        if scorer in NARRATIVEQA_SCORERS:
            raise BadInput(f"scorer {scorer!r} is for open questions, not multiple choice")
        if scorer == "rouge_l":
            return rouge_l_f1(prediction, [ground_truth.get("text", "")])
        return quality_correct(
            prediction, ground_truth["letter"], ground_truth.get("options") or ()
        )
    refs = ground_truth if isinstance(ground_truth, list) else [ground_truth]
    refs = [r for r in refs if isinstance(r, str)]
    if not refs:
        raise BadInput(f"{task}: no reference answers in {ground_truth!r}")
    if scorer == "exact_match":
        return exact_match(prediction, refs)
    if scorer in NARRATIVEQA_SCORERS:
        return narrativeqa_scores(prediction, refs, metrics=[scorer])[scorer]
    return rouge_l_f1(prediction, refs)


__all__ = ["NARRATIVEQA_SCORERS", "SCORERS", "exact_match", "rouge_l_f1", "score"]
