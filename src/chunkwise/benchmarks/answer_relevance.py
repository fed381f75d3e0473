"""Answer relevance in the Ragas manner, implemented here (no ragas package, no network).

A QA metric beside :mod:`.qa_metrics` (the Chow–Liu paper's for LongQA and NarrativeQA), that
no benchmark's scorer calls: it needs a judge model, so it runs over a finished run's
predictions of any benchmark whose lines carry the question.

For an (question, answer) pair a judge model writes ``k`` questions that the answer would
answer, and says whether the answer is noncommittal (evasive, vague, "I don't know"). The score
is the mean cosine similarity between the real question and the generated ones, under the
embedder; a noncommittal answer scores 0. Any model spec can be the judge (chat models get an
instruction with a two-field reply, base models a few-shot completion scaffold); any
:func:`chunkwise.embed.get_embedder` name can embed.

Conventions, as in Ragas' ``answer_relevancy``: ``k = 3``; one noncommittal verdict among the
``k`` is enough to score 0; when every generated question is empty the score is NaN (reported
apart, not averaged). Two additions: an empty answer, or one that a fixed phrase list calls
noncommittal ("I don't know", "not mentioned", ...), scores 0 without asking the judge, because
base-model judges cannot be trusted to flag evasion; and with ``k > 1`` the ``k`` generations
are sampled (temperature 0.7 by default, seeds 0..k-1) so that they differ, where greedy decoding
would write the same question ``k`` times.

Command line, over a run's predictions (their lines carry ``question`` and ``prediction``)::

    python -m chunkwise.benchmarks.answer_relevance runs/NAME/predictions/TASK.jsonl \\
        --judge hf:default --embedder minilm --k 3
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise.errors import BadInput
from chunkwise.llm import LLM, GenerationParams, Request

CHAT_PROMPT = """Here is an answer someone gave to a question you cannot see.

Answer: {answer}

Write the single question this answer most directly answers. Then say whether the answer is noncommittal: evasive, vague, or refusing to answer (for example "I don't know", "the text does not say", "it is unclear").

Reply in exactly this format:
Question: ...
Noncommittal: yes or no"""

# A base model continues text: show it two answers with the question each one answers, then
# the answer to judge, and stop at the end of the line it writes.
BASE_PROMPT = """Answer: Albert Einstein was born in Ulm, Germany, in 1879.
Question it answers: Where and when was Albert Einstein born?

Answer: The treaty was signed because both kings wanted to end the war before winter.
Question it answers: Why was the treaty signed?

Answer: {answer}
Question it answers:"""

NONCOMMITTAL_PHRASES = (
    "i don't know",
    "i do not know",
    "not sure",
    "cannot be determined",
    "can't be determined",
    "cannot determine",
    "not mentioned",
    "not stated",
    "does not say",
    "doesn't say",
    "does not mention",
    "no information",
    "not enough information",
    "insufficient information",
    "it is unclear",
    "cannot answer",
    "can't answer",
    "unable to answer",
)
#: evasive only as the whole answer ("The Unknown Soldier" is a committal answer)
NONCOMMITTAL_WHOLE = ("unknown", "unclear", "none", "n a", "no answer", "not known", "no idea")
_WORD = re.compile(r"[a-z']+")


def looks_noncommittal(answer: str) -> bool:
    """Whether ``answer`` is empty or evasive by a fixed phrase list (a judge-free floor)."""
    text = " ".join(_WORD.findall((answer or "").lower().replace("’", "'")))
    if not text or text in NONCOMMITTAL_WHOLE:
        return True
    return any(p in text for p in NONCOMMITTAL_PHRASES)


_Q_FIELD = re.compile(r"question\s*:\s*(.*)", re.I)
_NC_FIELD = re.compile(r"noncommittal\s*:\s*(\w+)", re.I)


def parse_judgement(text: str, kind: str) -> tuple[str, bool]:
    """(generated question, noncommittal flag) from a judge's reply."""
    raw = (text or "").strip()
    if kind == "chat":
        qm = _Q_FIELD.search(raw)
        question = qm.group(1).strip() if qm else raw.splitlines()[0].strip() if raw else ""
        question = question.split("\n")[0].strip()
        nm = _NC_FIELD.search(raw)
        flag = bool(nm and nm.group(1).lower() in {"yes", "1", "true", "y"})
        return question, flag
    first = raw.splitlines()[0].strip() if raw else ""
    return first, False


@dataclass
class Relevance:
    """One answer's relevance: ``score`` in [-1, 1] (NaN when no question came back)."""

    score: float
    questions: list[str] = field(default_factory=list)
    similarities: list[float] = field(default_factory=list)
    noncommittal: bool = False
    #: why the judge was not asked (``"empty or evasive answer"``), else None
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "score": None if math.isnan(self.score) else round(self.score, 6),
            "questions": self.questions,
            "similarities": [round(s, 6) for s in self.similarities],
            "noncommittal": self.noncommittal,
            "skipped": self.skipped,
        }


class AnswerRelevance:
    """``AnswerRelevance(judge, embedder).score(question, answer) -> Relevance``.

    ``judge``: an :class:`~chunkwise.llm.LLM` or a model spec. ``embedder``: an object with
    ``encode(texts)`` (normalized rows) or a :func:`chunkwise.embed.get_embedder` name.
    ``prompts``: auto | chat | base (auto: chat when the judge takes chat messages).
    """

    def __init__(
        self,
        judge: LLM | str,
        embedder: Any = "minilm",
        *,
        k: int = 3,
        temperature: float = 0.7,
        prompts: str = "auto",
        max_new_tokens: int = 64,
        phrase_floor: bool = True,
    ):
        if k < 1:
            raise BadInput(f"k must be at least 1, got {k}")
        if prompts not in ("auto", "chat", "base"):
            raise BadInput(f"prompts={prompts!r}; valid: auto, chat, base")
        if isinstance(judge, str):
            from chunkwise.llm import load_llm

            judge = load_llm(judge)
        if isinstance(embedder, str):
            from chunkwise.embed import get_embedder

            embedder = get_embedder(embedder)
        self.judge = judge
        self.embedder = embedder
        self.k = k
        self.temperature = temperature
        self.kind = prompts if prompts != "auto" else ("chat" if judge.chat else "base")
        self.max_new_tokens = max_new_tokens
        self.phrase_floor = phrase_floor

    def _requests(self, answer: str) -> list[Request]:
        template = CHAT_PROMPT if self.kind == "chat" else BASE_PROMPT
        text = template.format(answer=" ".join(answer.split()))
        prompt = self.judge.as_prompt(text)
        stop = () if self.kind == "chat" else ("\n",)
        out = []
        for i in range(self.k):
            sample = self.k > 1 and self.temperature > 0
            params = GenerationParams(
                max_new_tokens=self.max_new_tokens,
                temperature=self.temperature if sample else 0.0,
                seed=i if sample else None,
                stop=stop,
            )
            out.append(Request(prompt, params))
        return out

    def score(self, question: str, answer: str) -> Relevance:
        return self.score_many([(question, answer)])[0]

    def score_many(self, pairs: Sequence[tuple[str, str]]) -> list[Relevance]:
        """Score several pairs with one batched judge call."""
        results: list[Relevance | None] = [None] * len(pairs)
        todo: list[int] = []
        requests: list[Request] = []
        for i, (_, answer) in enumerate(pairs):
            if self.phrase_floor and looks_noncommittal(answer):
                results[i] = Relevance(0.0, noncommittal=True, skipped="empty or evasive answer")
                continue
            todo.append(i)
            requests.extend(self._requests(answer))
        outs = self.judge.generate(requests) if requests else []
        texts: list[str] = []
        verdicts: list[tuple[int, list[str], bool]] = []
        for n, i in enumerate(todo):
            judged = [
                parse_judgement(o.text, self.kind) for o in outs[n * self.k : (n + 1) * self.k]
            ]
            qs = [q for q, _ in judged]
            verdicts.append((i, qs, any(flag for _, flag in judged)))
            texts.append(pairs[i][0])
            texts.extend(q for q in qs if q)
        vecs = np.asarray(self.embedder.encode(texts), dtype=np.float64) if texts else None
        row = 0
        for i, qs, noncommittal in verdicts:
            real = vecs[row]
            row += 1
            made = [q for q in qs if q]
            sims = []
            for _ in made:
                v = vecs[row]
                row += 1
                denom = float(np.linalg.norm(real) * np.linalg.norm(v))
                sims.append(float(real @ v / denom) if denom > 0 else 0.0)
            if not made:
                value = float("nan")
            elif noncommittal:
                value = 0.0
            else:
                value = float(np.mean(sims))
            results[i] = Relevance(value, qs, sims, noncommittal)
        return results  # type: ignore[return-value]


def summarize(results: Sequence[Relevance]) -> dict[str, Any]:
    """Mean score in percent over the scored answers; NaNs counted apart."""
    scored = [r.score for r in results if not math.isnan(r.score)]
    return {
        "answer_relevance": round(100.0 * float(np.mean(scored)), 3) if scored else None,
        "n": len(results),
        "scored": len(scored),
        "no_question": len(results) - len(scored),
        "noncommittal": sum(r.noncommittal for r in results),
    }


def score_predictions_file(
    path: str | Path, scorer: AnswerRelevance, *, batch: int = 16
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Score a predictions JSONL (lines with ``question`` and ``prediction``)."""
    from chunkwise.io import read_jsonl

    rows = []
    for line, rec in read_jsonl(path):
        q, pred = rec.get("question"), rec.get("prediction")
        if not isinstance(q, str) or not q.strip():
            raise BadInput(f"{path}:{line}: no 'question' to compare with (id {rec.get('id')!r})")
        rows.append((rec.get("id"), q, pred if isinstance(pred, str) else ""))
    results: list[Relevance] = []
    for s in range(0, len(rows), batch):
        part = rows[s : s + batch]
        results.extend(scorer.score_many([(q, p) for _, q, p in part]))
    per = [{"id": rid, **r.to_dict()} for (rid, _, _), r in zip(rows, results, strict=True)]
    return summarize(results), per


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m chunkwise.benchmarks.answer_relevance",
        description="Ragas-style answer relevance of a predictions file, with any judge model.",
    )
    ap.add_argument("predictions", help="JSONL with 'question' and 'prediction' per line")
    ap.add_argument("--judge", default="hf:default", help="judge model spec")
    ap.add_argument("--embedder", default="minilm", help="embedder name (minilm, hashing, ...)")
    ap.add_argument("--k", type=int, default=3, help="generated questions per answer")
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--per-example", metavar="JSONL", help="also write each example's result")
    args = ap.parse_args(argv)
    try:
        scorer = AnswerRelevance(args.judge, args.embedder, k=args.k, temperature=args.temperature)
        summary, per = score_predictions_file(args.predictions, scorer)
    except BadInput as e:
        print(f"answer_relevance: error: {e}", file=sys.stderr)
        return 2
    summary.update(judge=args.judge, embedder=args.embedder, k=args.k)
    if args.per_example:
        from chunkwise.io import atomic_write_text

        atomic_write_text(args.per_example, "".join(json.dumps(p) + "\n" for p in per))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())


__all__ = [
    "AnswerRelevance",
    "Relevance",
    "looks_noncommittal",
    "parse_judgement",
    "score_predictions_file",
    "summarize",
]
