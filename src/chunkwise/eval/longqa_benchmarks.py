"""LongQA (HELMET-style) and full-story NarrativeQA as registered benchmarks.

* ``longqa`` — tasks ``en_qa``, ``en_mc``, ``narrativeqa`` (:mod:`chunkwise.data.longqa`).
* ``narrativeqa`` — task ``narrativeqa`` (:mod:`chunkwise.data.narrativeqa`), ``--data hub``,
  ``hub:SPLIT`` or a local folder/file, optionally ``?min_words=N``.

Scorers (``--scorer``): ``official`` = ROUGE-L F1 for the open questions and exact match of the
option letter for ``en_mc``; ``exact_match`` (SQuAD-normalised, max over references; the letter
for ``en_mc``); ``rouge_l``; and NarrativeQA's other metrics for open questions, ``bleu1``,
``bleu4`` and ``meteor`` (max over references; METEOR needs the offline WordNet from
``make install``, see :mod:`chunkwise.eval.qa_metrics`). Answer relevance (the Chow–Liu paper's metric for LongQA and
NarrativeQA) needs a judge model, so it runs over a finished run's predictions:
``python -m chunkwise.eval.answer_relevance runs/NAME/predictions/TASK.jsonl --judge SPEC``.

QuALITY through the shared L-Eval subset is the ``leval`` benchmark's ``quality`` task.

Importing this module registers both benchmarks.
"""

from __future__ import annotations

from typing import Any

from chunkwise.errors import BadInput
from chunkwise.eval.benchmarks import Benchmark, register_benchmark

PROMPT_VERSION = "longqa-1"
SCORERS = ("official", "exact_match", "rouge_l", "bleu1", "bleu4", "meteor")
#: scorers that are one of NarrativeQA's metrics (open questions only)
NARRATIVEQA_SCORERS = ("bleu1", "bleu4", "meteor")
QA_ANSWER_TOKENS = 64
MC_ANSWER_TOKENS = 16


def exact_match(prediction: str, references: list[str]) -> float:
    from chunkwise.eval.qa_metrics import normalize_answer

    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(r) for r in references))


def rouge_l_f1(prediction: str, references: list[str]) -> float:
    from chunkwise.eval.qa_metrics import rouge_l

    return max((rouge_l(prediction, r) for r in references), default=0.0)


def score(task: str, prediction: str, ground_truth: Any, scorer: str = "official") -> float:
    """One prediction's score in [0, 1]."""
    if scorer not in SCORERS:
        raise BadInput(f"unknown scorer {scorer!r}; valid: {', '.join(SCORERS)}")
    prediction = prediction if isinstance(prediction, str) else ""
    if task == "en_mc":
        from chunkwise.eval.qa_metrics import quality_correct

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
        from chunkwise.eval.qa_metrics import narrativeqa_scores

        return narrativeqa_scores(prediction, refs, metrics=[scorer])[scorer]
    return rouge_l_f1(prediction, refs)


def build_query(task: str, example: dict[str, Any], kind: str = "chat", window: int | None = None):
    from chunkwise.strategies import Query

    if kind not in ("chat", "base"):
        raise BadInput(f"prompt kind must be chat or base, got {kind!r}")
    question = (example.get("input") or "").strip()
    if not question:
        raise BadInput(f"{task} id {example.get('id')!r}: the question is empty")
    if task == "en_mc":
        return Query(
            question,
            task="multiple_choice",
            options=tuple(example.get("options") or ()),
            max_answer_tokens=MC_ANSWER_TOKENS,
        )
    return Query(question, task="qa", max_answer_tokens=QA_ANSWER_TOKENS)


def _score(task: str, prediction: str, ground_truth: Any, scorer: str, extract: str) -> float:
    return score(task, prediction, ground_truth, scorer)


def _longqa() -> Benchmark:
    from chunkwise.data import longqa

    return Benchmark(
        name="longqa",
        tasks=longqa.TASKS,
        parse_data=longqa.parse_data_spec,
        load=longqa.load_task,
        build_query=build_query,
        score=_score,
        scorers=SCORERS,
        extractors=("none",),
        prompt_version=lambda: PROMPT_VERSION,
        display=dict(longqa.DISPLAY),
        default_data="hub",
    )


def _narrativeqa() -> Benchmark:
    from chunkwise.data import narrativeqa as nqa
    from chunkwise.data.longqa import TaskData

    def load(task, spec, *, limit=None, revision=None, seed=0, count_tokens=None):
        if task != "narrativeqa":
            raise BadInput(f"unknown NarrativeQA task {task!r}; valid: narrativeqa")
        examples, source = nqa.load_narrativeqa(spec, limit=limit, revision=revision)
        return TaskData(task, examples, source, source["total"])

    return Benchmark(
        name="narrativeqa",
        tasks=("narrativeqa",),
        parse_data=nqa.parse_data_spec,
        load=load,
        build_query=build_query,
        score=_score,
        scorers=SCORERS,
        extractors=("none",),
        prompt_version=lambda: PROMPT_VERSION,
        display={"narrativeqa": "NarrativeQA"},
        default_data="hub",
    )


register_benchmark("longqa", _longqa)
register_benchmark("narrativeqa", _narrativeqa)

__all__ = ["SCORERS", "build_query", "exact_match", "rouge_l_f1", "score"]
