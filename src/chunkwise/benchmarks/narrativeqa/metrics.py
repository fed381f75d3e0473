"""NarrativeQA's metrics (AllenNLP's script, with offline stand-ins).

Each metric is the max over the references, averaged over questions. BLEU-1 and BLEU-4 are
nltk's ``sentence_bleu`` with weights (1,0,0,0) and (0,0,0,1), unsmoothed, on Treebank word
tokens (``word_tokenize`` would need the punkt download; the Treebank tokenizer is what it
applies after sentence splitting, and answers are short). ``bleu4_style="raptor"`` gives
RAPTOR's variant (uniform weights, smoothing). METEOR is nltk's ``meteor_score`` on whitespace
tokens with WordNet from local files (:mod:`.wordnet`; never downloaded). ROUGE-L is
rouge-score's ``rougeL`` F-measure with the Porter stemmer on the first 100 words of the
prediction (AllenNLP uses py-rouge, which needs punkt offline; both score the LCS F1 over
lower-cased alphanumeric tokens). Scores are not rounded per question (the AllenNLP script
rounds each to 2 decimals).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from functools import cache

from chunkwise.benchmarks.narrativeqa.wordnet import wordnet_corpus
from chunkwise.errors import BadInput, MissingDependency


@cache
def _treebank():
    from nltk.tokenize import NLTKWordTokenizer

    return NLTKWordTokenizer()


def word_tokens(text: str) -> list[str]:
    return _treebank().tokenize(text)


def bleu(prediction: str, reference: str, n: int, style: str = "allennlp") -> float:
    """BLEU-1 or BLEU-4 of one prediction against one reference (see the module notes)."""
    from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

    hyp, ref = word_tokens(prediction), word_tokens(reference)
    if not hyp or not ref:
        return 0.0
    if n == 1:
        weights: tuple[float, ...] = (1.0, 0.0, 0.0, 0.0)
        smooth = None
    elif n == 4 and style == "allennlp":
        weights, smooth = (0.0, 0.0, 0.0, 1.0), None
    elif n == 4 and style == "raptor":
        weights, smooth = (0.25, 0.25, 0.25, 0.25), SmoothingFunction().method1
    else:
        raise BadInput(f"BLEU-{n} style {style!r}: valid n 1 or 4, styles allennlp or raptor")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nltk warns whenever an n-gram order has no overlap
        value = float(sentence_bleu([ref], hyp, weights=weights, smoothing_function=smooth))
    # unsmoothed, nltk returns the smallest float (not 0) when an order has no match
    return value if value > 1e-12 else 0.0


@cache
def _rouge_l():
    try:
        from rouge_score import rouge_scorer
    except ImportError:
        raise MissingDependency(
            "rouge-score (NarrativeQA ROUGE-L)", "pip install rouge-score"
        ) from None
    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, reference: str, limit_words: int = 100) -> float:
    words = prediction.split()
    if limit_words and len(words) > limit_words:
        prediction = " ".join(words[:limit_words])
    return float(_rouge_l().score(reference, prediction)["rougeL"].fmeasure)


def meteor(prediction: str, reference: str) -> float:
    from nltk.translate.meteor_score import meteor_score

    hyp, ref = prediction.split(), reference.split()
    if not hyp or not ref:
        return 0.0
    return float(meteor_score([ref], hyp, wordnet=wordnet_corpus()))


NARRATIVEQA_METRICS = ("rouge_l", "bleu1", "bleu4", "meteor")


def narrativeqa_scores(
    prediction: str,
    references: Sequence[str],
    metrics: Sequence[str] = NARRATIVEQA_METRICS,
    bleu4_style: str = "allennlp",
) -> dict[str, float]:
    """Each metric's max over the references for one prediction."""
    refs = [references] if isinstance(references, str) else list(references)
    if not refs:
        raise BadInput("NarrativeQA question without references")
    fns = {
        "rouge_l": lambda r: rouge_l(prediction, r),
        "bleu1": lambda r: bleu(prediction, r, 1),
        "bleu4": lambda r: bleu(prediction, r, 4, bleu4_style),
        "meteor": lambda r: meteor(prediction, r),
    }
    out = {}
    for m in metrics:
        if m not in fns:
            raise BadInput(f"unknown NarrativeQA metric {m!r}; valid: {', '.join(fns)}")
        out[m] = max(fns[m](r) for r in refs)
    return out


def narrativeqa_evaluate(
    pairs: Iterable[tuple[str, Sequence[str]]],
    metrics: Sequence[str] = NARRATIVEQA_METRICS,
    bleu4_style: str = "allennlp",
) -> dict[str, float]:
    """Mean of each metric over ``(prediction, references)`` pairs."""
    sums: dict[str, float] = dict.fromkeys(metrics, 0.0)
    n = 0
    for pred, refs in pairs:
        for k, v in narrativeqa_scores(pred, refs, metrics, bleu4_style).items():
            sums[k] += v
        n += 1
    out = {k: (v / n if n else 0.0) for k, v in sums.items()}
    out["n"] = n
    return out


__all__ = [
    "NARRATIVEQA_METRICS",
    "bleu",
    "meteor",
    "narrativeqa_evaluate",
    "narrativeqa_scores",
    "rouge_l",
    "word_tokens",
]
