"""The math_find family: the largest or smallest number of a long list
(:mod:`chunkwise.data.synthetic`'s lists), where every part holds a candidate."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import ClassVar

from chunkwise.data import synthetic
from chunkwise.data.families import wordings
from chunkwise.data.families.base import (
    CONFIDENCE,
    CountTokens,
    Doc,
    Evidence,
    Family,
    Finding,
    Located,
    Straddle,
)


class MathFind(Family):
    """The largest or smallest number of a long list: each part reports its own extreme."""

    name = "math_find"
    topic = "a list of numbers"
    KINDS: ClassVar[dict[str, Callable[..., int]]] = {"largest number": max, "smallest number": min}

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
        kinds = [i for i, k in enumerate(synthetic.MATH_FIND_KINDS) if k[0] in self.KINDS]
        per = len(synthetic.MATH_FIND_KINDS)
        recs = synthetic.generate(
            "math_find",
            length_tokens=length_tokens,
            n=per * ((n + len(kinds) - 1) // len(kinds)),
            seed=seed,
            count_tokens=count_tokens,
        )
        picked = [r for r in recs if r["id"] % per in kinds][:n]
        out = []
        for r in picked:
            what = synthetic.MATH_FIND_KINDS[r["id"] % per][0]
            question = wordings.pick(self.name, "question", templates, seed, length_tokens, r["id"])
            out.append(
                Doc(
                    f"{self.name}-{length_tokens}-{seed}-{r['id']}",
                    self.name,
                    r["context"],
                    question.fill(what=what),
                    str(int(r["answer"][0])),
                    task="math",
                    max_answer_tokens=8,
                    meta={
                        "seed": seed,
                        "length": length_tokens,
                        "what": what,
                        **wordings.record(templates, [("question", question)]),
                    },
                )
            )
        return out

    def evidence_in(self, doc: Doc, start: int, end: int) -> list[Evidence]:
        pick = self.KINDS[doc.meta["what"]]
        nums = [
            (m.start() + start, m.end() + start, int(m.group()))
            for m in re.finditer(r"\d+", doc.context[start:end])
        ]
        # a number cut by the chunk edge would be misread
        for s, e, _ in nums:
            if (s == start and s > 0 and doc.context[s - 1].isdigit()) or (
                e == end and e < len(doc.context) and doc.context[e].isdigit()
            ):
                raise Straddle(f"{doc.id}: a number is cut by a chunk edge")
        if not nums:
            return []
        s, e, v = next(x for x in nums if x[2] == pick(y[2] for y in nums))
        text = f"This part lists {len(nums)} numbers; the {doc.meta['what']} among them is {v}."
        return [Evidence(s, e, "partial", text, str(v))]

    def resolve(self, doc: Doc, items: Located, stage: str) -> Finding:
        if not items:
            return self.nothing(doc)
        pick = self.KINDS[doc.meta["what"]]
        best = pick(int(ev.answer) for _, ev in items)
        if len(items) == 1:
            ev = items[0][1]
            return Finding(
                ev.text,
                "Only this part of the list is visible, so the "
                f"{doc.meta['what']} of the whole list may lie in another part.",
                ev.answer,
                ev.confidence,
            )
        listed = ", ".join(f"{ev.answer} (part {p + 1})" for p, ev in items)
        word = "largest" if pick is max else "smallest"
        return Finding(
            f"The parts report: {listed}.",
            f"The {doc.meta['what']} of the list is the {word} of the parts' answers: {best}.",
            str(best),
            CONFIDENCE["direct"] if stage == "reduce" else CONFIDENCE["partial"],
        )
