"""QASPER's scoring, the official evaluator's rules.

Each annotation is one reference: unanswerable → "Unanswerable" (type ``none``); extractive
spans → the spans joined by ", " (``extractive``); else the free-form answer (``abstractive``);
else "Yes" / "No" (``boolean``). Answer F1 is SQuAD's token F1 after normalisation
(:mod:`chunkwise.benchmarks.qa_metrics`), the max over a question's references (ties keep the
first reference), averaged over questions; a missing prediction scores 0. "By type" buckets
each question under the type of its best-matching reference (questions without a prediction
are left out of the buckets).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from chunkwise.benchmarks.qa_metrics import normalize_answer, token_f1
from chunkwise.errors import BadInput

QASPER_TYPES = ("extractive", "abstractive", "boolean", "none")


def qasper_reference(annotation: Mapping[str, Any]) -> dict[str, Any]:
    """One annotation (``answer`` dict of the official files) as ``{answer, type, evidence}``."""
    a = annotation.get("answer", annotation)
    evidence = [e for e in (a.get("evidence") or []) if isinstance(e, str)]
    if a.get("unanswerable"):
        return {"answer": "Unanswerable", "type": "none", "evidence": []}
    spans = [s for s in (a.get("extractive_spans") or []) if isinstance(s, str)]
    if spans:
        return {"answer": ", ".join(spans), "type": "extractive", "evidence": evidence}
    if a.get("free_form_answer"):
        return {"answer": a["free_form_answer"], "type": "abstractive", "evidence": evidence}
    if a.get("yes_no"):
        return {"answer": "Yes", "type": "boolean", "evidence": evidence}
    if a.get("yes_no") is not None:
        return {"answer": "No", "type": "boolean", "evidence": evidence}
    raise BadInput(f"QASPER annotation without an answer: {dict(a)!r}")


def as_references(gold: Any) -> list[dict[str, Any]]:
    """Gold answers as reference dicts: reference dicts pass through; plain strings get a
    type inferred from their text (``none`` / ``boolean`` / ``abstractive``)."""
    items = gold if isinstance(gold, list) else [gold]
    refs = []
    for g in items:
        if isinstance(g, Mapping) and "answer" in g and "type" in g:
            refs.append(dict(g))
        elif isinstance(g, Mapping):
            refs.append(qasper_reference(g))
        elif isinstance(g, str):
            low = normalize_answer(g)
            kind = (
                "none"
                if low == "unanswerable"
                else ("boolean" if low in ("yes", "no") else "abstractive")
            )
            refs.append({"answer": g, "type": kind, "evidence": []})
        else:
            raise BadInput(f"QASPER reference {g!r} is neither a string nor an annotation")
    if not refs:
        raise BadInput("QASPER question without references")
    return refs


def qasper_answer_f1(prediction: str, references: Any) -> tuple[float, str]:
    """(max token F1 over the references, type of the best reference; first wins ties)."""
    best, kind = -1.0, "none"
    for ref in as_references(references):
        f = token_f1(prediction, ref["answer"])
        if f > best:
            best, kind = f, ref["type"]
    return best, kind


def paragraph_f1(predicted: Sequence[str], gold: Sequence[str]) -> float:
    """Evidence F1 over sets of paragraphs (both empty: 1)."""
    if not gold:
        return 1.0 if not predicted else 0.0
    same = len(set(predicted) & set(gold))
    if same == 0:
        return 0.0
    p, r = same / len(set(predicted)), same / len(set(gold))
    return 2 * p * r / (p + r)


def qasper_evaluate(
    gold: Mapping[str, Any],
    predictions: Mapping[str, str],
    evidence: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """Answer F1 (and Evidence F1 when ``evidence`` is given) over ``gold`` question ids."""
    answer, by_type = [], defaultdict(list)
    ev_scores = []
    missing = 0
    for qid, refs in gold.items():
        refs = as_references(refs)
        if qid not in predictions:
            missing += 1
            answer.append(0.0)
            ev_scores.append(0.0)
            continue
        f, kind = qasper_answer_f1(predictions[qid], refs)
        answer.append(f)
        by_type[kind].append(f)
        if evidence is not None:
            got = list(evidence.get(qid, []))
            ev_scores.append(max(paragraph_f1(got, r.get("evidence", [])) for r in refs))

    def mean(xs: list[float]) -> float:
        return sum(xs) / len(xs) if xs else 0.0

    out: dict[str, Any] = {
        "answer_f1": mean(answer),
        "answer_f1_by_type": {k: mean(v) for k, v in by_type.items()},
        "questions_by_type": {k: len(v) for k, v in by_type.items()},
        "missing_predictions": missing,
        "n": len(answer),
    }
    if evidence is not None:
        out["evidence_f1"] = mean(ev_scores)
    return out


def score(
    task: str, prediction: str, ground_truth: Any, scorer: str = "official", extract: str = "none"
) -> float:
    """One prediction's answer F1 in [0, 1] (QASPER has one metric: ``scorer`` is ignored)."""
    return qasper_answer_f1(prediction, ground_truth)[0]


__all__ = [
    "QASPER_TYPES",
    "as_references",
    "paragraph_f1",
    "qasper_answer_f1",
    "qasper_evaluate",
    "qasper_reference",
    "score",
]
