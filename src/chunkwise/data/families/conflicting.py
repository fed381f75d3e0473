"""The conflicting family: one plain statement of a fact against a hedged, unreliable or
retracted one elsewhere in the document; the plain statement is the answer. Both statements
and the question are worded by :mod:`.wordings` (a phrasing style per document)."""

from __future__ import annotations

import random

from chunkwise.data import synthetic
from chunkwise.data.families import wordings
from chunkwise.data.families.base import CountTokens, Doc, Evidence, Family, evidence_span

_THINGS = (
    "reactor", "ferry", "museum", "depot", "hangar", "clinic", "orchard", "quarry", "mill",
    "signal box", "pump house", "weather station",
)  # fmt: skip


class Conflicting(Family):
    """The same fact stated plainly in one place and, differently, by a hedged, unreliable or
    retracted source in another: the plain statement is the answer."""

    name = "conflicting"
    unanswerable_variants = True
    topic = "an access code"

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
        line_tokens = max(1, count_tokens(synthetic.NOISE))
        lines = max(8, length_tokens // line_tokens)
        out = []
        for i in range(n):
            thing = rng.choice(_THINGS)
            true, false = (str(c) for c in rng.sample(range(1000, 10000), 2))
            weak_kind = ("hedged", "unreliable", "retracted")[i % 3]
            question = wordings.pick(self.name, "question", templates, seed, length_tokens, i)
            plain_t, weak_t = wordings.pick_conflict(templates, weak_kind, seed, length_tokens, i)
            plain = plain_t.fill(thing=thing, code=true)
            weak = weak_t.fill(thing=thing, code=false)
            # far apart (first and last third), so that the conflict is between chunks
            a = rng.randrange(0, lines // 3)
            b = rng.randrange(lines - lines // 3, lines)
            # the order switches every three documents (not a coin): with 12 a length, a coin put
            # the plain statement first in 9, none in a last part, and the adapter trained on
            # them never found a plain statement at a document's end (recipes/embedded)
            first, second = (plain, weak) if i // 3 % 2 == 0 else (weak, plain)
            body = []
            for k in range(lines):
                body.append(synthetic.NOISE)
                if k == a:
                    body.append(first + "\n")
                elif k == b:
                    body.append(second + "\n")
            context = "".join(body)
            ps, pe = evidence_span(context, plain, self.name)
            ws, we = evidence_span(context, weak, self.name)
            out.append(
                Doc(
                    f"{self.name}-{length_tokens}-{seed}-{i}",
                    self.name,
                    context,
                    question.fill(thing=thing),
                    true,
                    max_answer_tokens=8,
                    evidence=[
                        Evidence(ps, pe, "direct", plain, true),
                        Evidence(ws, we, weak_kind, weak, false),
                    ],
                    meta={
                        "seed": seed,
                        "length": length_tokens,
                        "weak": weak_kind,
                        "style": plain_t.style,
                        **wordings.record(
                            templates,
                            [("question", question), ("plain", plain_t), (weak_kind, weak_t)],
                        ),
                    },
                )
            )
        return out
