"""The extractive_qa family: spans of Python's own language reference
(``pydoc_data.topics``, PSF License): which four words follow a quoted phrase?"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from chunkwise.data.families import wordings
from chunkwise.data.families.base import CountTokens, Doc, Evidence, Family, evidence_span
from chunkwise.data.families.splits import HELDOUT_SEED, SPLITS, span_split
from chunkwise.errors import BadInput

#: a sentence of the language reference a span question may quote: plain words on one line
_SPAN_SENTENCE = re.compile(r"[A-Z][a-z][a-z ,]{40,200}[a-z]\.")
#: the same across the reference's hard line wraps (not across a blank line): ~12x as many
_WRAPPED_SENTENCE = re.compile(r"(?<![\w-])[A-Z][a-z](?:[a-z ,]|\n(?!\n)){40,200}[a-z]\.")

#: the question span_questions asks (ExtractiveQA words it with a template of wordings.yaml)
_QUESTION = 'Which four words come right after "{prefix}" in the document?'
_ASKED = re.compile(re.escape(_QUESTION).replace(re.escape("{prefix}"), "(.+)"))


def reference_sections(rng: random.Random) -> list[str]:
    """The language reference's topics (``## name`` + text) in an order drawn from ``rng``."""
    from chunkwise.data.python_reference import reference_topics

    topics = reference_topics()
    order = list(range(len(topics)))
    rng.shuffle(order)
    return [f"## {topics[k][0]}\n\n{topics[k][1]}" for k in order]


def _spaced(words: Sequence[str]) -> re.Pattern[str]:
    """``words`` with any whitespace between them (a line wrap included)."""
    return re.compile(r"\s+".join(map(re.escape, words)))


def span_questions(
    context: str,
    rng: random.Random,
    k: int = 1,
    *,
    unique_answer: bool = False,
    wrapped: bool = False,
    split: str | None = None,
) -> list[tuple[str, Evidence]]:
    """Up to ``k`` questions "which four words come right after this quoted phrase?" over
    distinct sentences of ``context`` drawn by ``rng``: ``(question, evidence)`` pairs whose
    evidence is the quoted phrase plus the answer (the sentence's words 7-10), a span of
    ``context``. The quoted phrase occurs exactly once in ``context``; ``unique_answer``
    asks that of the answer too. ``wrapped`` also takes sentences that run across line
    wraps (phrases then match whatever whitespace the text has between their words).
    ``split`` (``"train"`` / ``"heldout"``) keeps only the sentences of that split
    (:func:`span_split`). One ``rng.shuffle`` whatever the options."""
    if split is not None and split not in SPLITS:
        raise BadInput(f"unknown span split {split!r}; known: {', '.join(SPLITS)}")
    pattern = _WRAPPED_SENTENCE if wrapped else _SPAN_SENTENCE
    cands = [m for m in pattern.finditer(context) if len(m.group().split()) >= 10]
    rng.shuffle(cands)

    def count(words: list[str]) -> int:
        return len(_spaced(words).findall(context)) if wrapped else context.count(" ".join(words))

    out: list[tuple[str, Evidence]] = []
    for m in cands:
        if len(out) >= k:
            break
        words = m.group().rstrip(".").split()
        if split is not None and span_split(words) != split:
            continue
        prefix = " ".join(words[:6])
        answer = " ".join(words[6:10])
        if count(words[:6]) != 1 or '"' in prefix:
            continue
        if unique_answer and count(words[6:10]) != 1:
            continue
        if wrapped:
            found = _spaced(words[:10]).search(context)
            assert found is not None  # the sentence holds it
            s, e = found.span()
            span_text = found.group()
        else:
            span_text = f"{prefix} {answer}"
            s, e = evidence_span(context, span_text, ExtractiveQA.name)
        question = _QUESTION.format(prefix=prefix)
        out.append((question, Evidence(s, e, "direct", span_text, answer)))
    return out


class ExtractiveQA(Family):
    """Spans of Python's language reference: which words follow a quoted phrase?
    Scored by :meth:`Family.score` (the four words as a whole token run of the reply).

    The reference is one fixed text, so documents of different seeds share sentences: a
    seed from :data:`HELDOUT_SEED` on asks only about held-out sentences and a lower seed
    only about training ones (:func:`span_split`), and no question repeats within one call.
    Sentences may run across the reference's line wraps (about twelve times as many to draw
    from as one-line ones)."""

    name = "extractive_qa"
    topic = "the quoted phrase"
    #: the quoted phrase occurs once in the document (span_questions), so cutting its sentence
    #: leaves the question without an answer; off unless named, as make default-mr's shipped
    #: data was built without them (synth --unanswerable-families extractive_qa)
    unanswerable_variants = True
    unanswerable_by_default = False

    def cut_span(self, context: str, ev: Evidence) -> tuple[int, int]:
        """The whole sentence the evidence opens (its words 1-10 are the span), so that no
        broken sentence gives the cut away, with the spaces that part it from the next
        sentence on its line (or, at a line's end, from the one before)."""
        dot = context.find(".", ev.end)
        if dot < 0:
            return ev.start, ev.end
        start, end = ev.start, dot + 1
        after = end
        while after < len(context) and context[after] == " ":
            after += 1
        if after < len(context) and context[after] != "\n":
            end = after
        else:
            while start > 0 and context[start - 1] == " ":
                start -= 1
        return start, end

    def without_evidence(self, doc: Doc) -> Doc | None:
        out = super().without_evidence(doc)
        if out is None:
            return None
        for ev in doc.evidence:  # the quoted phrase must be gone with its sentence
            if _spaced(ev.text.split()[:6]).search(out.context):
                return None
        return out

    def make(
        self,
        *,
        n: int,
        seed: int,
        length_tokens: int,
        count_tokens: CountTokens,
        templates: str = "train",
    ) -> list[Doc]:
        wordings.check_selection(templates)
        rng = random.Random(seed)
        split = "heldout" if seed >= HELDOUT_SEED else "train"
        out: list[Doc] = []
        asked: set[str] = set()
        i = attempt = 0
        while len(out) < n and attempt < 20 * n:
            attempt += 1
            parts, used = [], 0
            for section in reference_sections(rng):
                size = count_tokens(section)
                if used + size > length_tokens:  # cut the last topic at a paragraph break
                    keep = int(len(section) * (length_tokens - used) / size)
                    cut = section.rfind("\n\n", 0, keep)
                    section = section[:cut] if cut > 0 else ""
                if section:
                    parts.append(section)
                    used += count_tokens(section)
                if used >= 0.9 * length_tokens:
                    break
            context = "\n\n".join(parts)
            for question, ev in span_questions(context, rng, 1, wrapped=True, split=split):
                if question in asked:
                    continue
                asked.add(question)
                worded = wordings.pick(self.name, "question", templates, seed, length_tokens, i)
                prefix = _ASKED.fullmatch(question).group(1)  # type: ignore[union-attr]
                meta = {
                    "seed": seed,
                    "length": length_tokens,
                    "split": split,
                    **wordings.record(templates, [("question", worded)]),
                }
                doc_id = f"{self.name}-{length_tokens}-{seed}-{i}"
                out.append(self.doc(doc_id, context, worded.fill(prefix=prefix), ev, meta))
                i += 1
        return out

    def doc(
        self, doc_id: str, context: str, question: str, ev: Evidence, meta: dict[str, Any]
    ) -> Doc:
        """One span question as a document of this family (from :func:`span_questions`)."""
        return Doc(
            doc_id,
            self.name,
            context,
            question,
            ev.answer,
            task="qa",
            max_answer_tokens=16,
            evidence=[ev],
            meta=meta,
        )
