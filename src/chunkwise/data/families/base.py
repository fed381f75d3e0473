"""The contract every document family follows: evidence, findings, documents, and
:class:`Family`, whose default ``resolve`` serves single-answer families.

Evidence carries a *kind*, and the kind fixes its confidence (the calibration rule the map
prompt teaches): a direct statement of the answer scores 5; a part of the answer that is stated
but incomplete (a local maximum, a link of a chain) scores 4 or 3; a fact whose relevance must
be inferred 2.5; a hedged claim 2; an unreliable source 1.5; a retracted claim 1; nothing 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from chunkwise.errors import BadInput
from chunkwise.strategies.base import Query
from chunkwise.strategies.protocol import NO_INFO

CountTokens = Callable[[str], int]

#: the calibration rule: evidence kind -> confidence (0-5)
CONFIDENCE: dict[str, float] = {
    "direct": 5.0,
    "partial": 4.0,
    "link": 3.0,
    "inferred": 2.5,
    "hedged": 2.0,
    "unreliable": 1.5,
    "retracted": 1.0,
}


@dataclass(frozen=True)
class Evidence:
    """One sentence (span) of a document that bears on the question."""

    start: int
    end: int
    kind: str  # a key of CONFIDENCE
    text: str  # the sentence as the document has it
    answer: str  # what this evidence alone supports
    #: family-specific detail the resolver needs (e.g. a chain link's names)
    data: tuple[str, ...] = ()

    @property
    def confidence(self) -> float:
        return CONFIDENCE[self.kind]


@dataclass
class Finding:
    """What a set of evidence supports: the four protocol fields (answer None: no information)."""

    extracted_information: str
    rationale: str
    answer: str | None
    confidence: float


@dataclass
class Doc:
    id: str
    family: str
    context: str
    question: str
    answer: str
    task: str = "retrieval"
    answer_prefix: str = ""
    max_answer_tokens: int = 0
    evidence: list[Evidence] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def query(self) -> Query:
        return Query(
            self.question,
            self.task,
            answer_prefix=self.answer_prefix,
            max_answer_tokens=self.max_answer_tokens,
        )


Located = Sequence[tuple[int, Evidence]]  # (chunk index, evidence)


def _parts(items: Located, stage: str = "reduce") -> str:
    """Where evidence is, as the stage can see it: a map call sees one part and no number."""
    if stage == "map":
        return "this part"
    ps = sorted({p + 1 for p, _ in items})
    return ("part " if len(ps) == 1 else "parts ") + ", ".join(map(str, ps))


class Family:
    """A document family: ``make`` builds documents, ``resolve`` says what evidence supports."""

    name = ""
    #: what the question is about, for "nothing here" rationales
    topic = "the question"

    def make(
        self,
        *,
        n: int,
        seed: int,
        length_tokens: int,
        count_tokens: CountTokens,
        templates: str = "train",
    ) -> list[Doc]:
        """``n`` documents of about ``length_tokens`` tokens from ``seed``, worded with the
        ``templates`` of :mod:`~chunkwise.data.families.wordings` (``train``, ``heldout`` or
        ``original``); each document's meta records its template ids and selection."""
        raise NotImplementedError

    def score(self, doc: Doc, prediction: str) -> float:
        """1.0 for a correct prediction (default: the answer appears as a whole token run,
        case and spacing ignored)."""
        pred = " ".join(re.findall(r"[\w-]+", prediction.lower()))
        gold = " ".join(re.findall(r"[\w-]+", doc.answer.lower()))
        return float(
            bool(gold) and re.search(rf"(?<![\w-]){re.escape(gold)}(?![\w-])", pred) is not None
        )

    def evidence_in(self, doc: Doc, start: int, end: int) -> list[Evidence]:
        """The evidence wholly inside the chunk ``[start, end)``; evidence cut by the chunk's
        edge raises :class:`Straddle` (the document is unusable at this chunk size)."""
        out = []
        for ev in doc.evidence:
            if start <= ev.start and ev.end <= end:
                out.append(ev)
            elif ev.start < end and start < ev.end:
                raise Straddle(f"{doc.id}: evidence {ev.text[:40]!r} is cut by a chunk edge")
        return out

    def nothing(self, doc: Doc) -> Finding:
        return Finding(
            "Nothing in this part bears on the question.",
            f"The question asks about {self.topic}; this part never mentions it.",
            None,
            0.0,
        )

    #: whether cutting a document's evidence out surely leaves its question without an answer
    #: (not so where every part holds candidates, as in math_find's lists)
    unanswerable_variants: ClassVar[bool] = False
    #: whether ``--unanswerable`` makes this family's variants when ``--unanswerable-families``
    #: does not name the families (a family whose variants came after a published recipe is
    #: left off, so that recipe's data stays what it was)
    unanswerable_by_default: ClassVar[bool] = True

    def without_evidence(self, doc: Doc) -> Doc | None:
        """``doc`` with its evidence cut out: the same question, no answer in the text, so every
        part is empty and the reduce must say ``[NO INFORMATION]`` (None where the family has
        no such variant)."""
        if not self.unanswerable_variants or not doc.evidence:
            return None
        text = doc.context
        for ev in sorted(doc.evidence, key=lambda e: e.start, reverse=True):
            text = _cut(text, *self.cut_span(doc.context, ev))
        return replace(
            doc, id=f"{doc.id}-none", context=text, answer=NO_INFO, evidence=[],
            meta={**doc.meta, "unanswerable": True},
        )  # fmt: skip

    def cut_span(self, context: str, ev: Evidence) -> tuple[int, int]:
        """The span of ``context`` :meth:`without_evidence` removes for ``ev``: the evidence
        itself (a family whose evidence is part of a sentence widens it to the sentence)."""
        return ev.start, ev.end

    def none_found(self, doc: Doc) -> str:
        """The reduce rationale when no part holds anything."""
        return f"No part of the document mentions {self.topic}, so the question has no answer here."

    def resolve(self, doc: Doc, items: Located, stage: str) -> Finding:
        """Single-answer families: the most reliable evidence wins; others are named."""
        if not items:
            return self.nothing(doc)
        ranked = sorted(items, key=lambda pe: (-pe[1].confidence, pe[0]))
        best_p, best = ranked[0]
        extracted = " ".join(dict.fromkeys(ev.text.strip() for _, ev in items))
        if len(items) == 1 or all(ev.answer == best.answer for _, ev in items):
            where = _parts(items, stage).capitalize()
            why = f"{where} {_kind_phrase(best.kind)}: {best.text.strip()}"
            if best.kind == "direct":  # the statement is the extracted information already;
                # quoting it again would cost a kv_retrieval reduce 118 tokens, past its budget
                why = f"{where} {_kind_phrase(best.kind)}."
            return Finding(extracted, why, best.answer, best.confidence)
        others = [
            f"{_parts([(p, ev)], stage)} gives {ev.answer} only as {_weak_phrase(ev.kind)} "
            f"(confidence {ev.confidence:g})"
            for p, ev in ranked[1:]
            if ev.answer != best.answer
        ]
        why = (
            f"{_parts([(best_p, best)], stage).capitalize()} {_kind_phrase(best.kind)} that the answer is "
            f"{best.answer} (confidence {best.confidence:g}); "
            + "; ".join(others)
            + ". The better-supported statement wins."
        )
        return Finding(extracted, why, best.answer, best.confidence)


def _cut(text: str, start: int, end: int) -> str:
    """``text`` without ``[start, end)`` and without the seam that would give the cut away: a
    line's own newline, or a JSON pair's ``", "``."""
    if start > 0 and end < len(text) and text[start - 1] == text[end] and text[end] in "\n ":
        end += 1
    elif text[end : end + 2] == ", ":
        end += 2
    elif text[start - 2 : start] == ", ":
        start -= 2
    return text[:start] + text[end:]


class Straddle(BadInput):
    """Evidence falls across a chunk boundary."""


def _kind_phrase(kind: str) -> str:
    return {
        "direct": "states it directly",
        "partial": "states part of it",
        "link": "states a link towards it",
        "inferred": "suggests it indirectly",
        "hedged": "only hedges about it",
        "unreliable": "reports it from an unreliable source",
        "retracted": "gives a claim that was later retracted",
    }[kind]


def _weak_phrase(kind: str) -> str:
    return {
        "hedged": "a hedged guess",
        "unreliable": "an unreliable report",
        "retracted": "a retracted claim",
        "inferred": "an inference",
        "link": "an indirect link",
        "partial": "a partial answer",
        "direct": "a direct statement",
    }[kind]


def evidence_span(context: str, text: str, where: str) -> tuple[int, int]:
    """Where ``text`` (a piece of evidence) sits in ``context``; a generator bug if nowhere."""
    at = context.find(text)
    if at < 0:
        raise AssertionError(f"{where}: evidence {text!r} not in the document")
    return at, at + len(text)
