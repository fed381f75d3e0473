"""The multihop family: fact chains (:mod:`chunkwise.data.multihop`), where a head names the
note holding the code, middle notes point on and the tail note holds the code."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from chunkwise.data import multihop
from chunkwise.data.families import wordings
from chunkwise.data.families.base import (
    CONFIDENCE,
    CountTokens,
    Doc,
    Evidence,
    Family,
    Finding,
    Located,
    evidence_span,
)


class MultiHop(Family):
    """Fact chains (:mod:`chunkwise.data.multihop`): a head names the note holding the code,
    middle notes point on, the tail note holds the code; distractor chains look the same."""

    name = "multihop"
    topic = "the chain of notes leading to a code"

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
        out = []
        for i in range(n):
            hops = rng.choice((2, 3))
            probe = multihop.generate(
                n=1, seed=seed * 1000 + i, hops=hops, filler_sections=0, section_sentences=3
            )
            per = max(
                1, count_tokens(probe[0]["context"]) // max(1, len(probe[0]["meta"]["sections"]))
            )
            filler = max(0, length_tokens // per - len(probe[0]["meta"]["sections"]))
            r = multihop.generate(
                n=1, seed=seed * 1000 + i, hops=hops, filler_sections=filler, section_sentences=3
            )[0]
            obj = re.match(r"What is the (\w+) code\?", r["input"]).group(1)  # type: ignore[union-attr]
            evidence = []
            for fact in multihop.facts_in(r["context"]):
                m = multihop.FACT.fullmatch(fact)
                assert m is not None
                if m.group("obj") and m.group("obj") != obj:
                    continue  # another object's head: not about this question
                s, e = evidence_span(r["context"], fact, self.name)
                if m.group("obj"):
                    ev = Evidence(s, e, "link", fact, f"in the note about {m.group('head')}")
                elif m.group("mid"):
                    ans = f"in the note about {m.group('next')}, if the note about {m.group('mid')} is on the chain"
                    ev = Evidence(s, e, "inferred", fact, ans)
                else:
                    ans = f"{m.group('code')}, if the note about {m.group('tail')} is on the chain"
                    ev = Evidence(s, e, "inferred", fact, ans)
                evidence.append(ev)
            question = wordings.pick(self.name, "question", templates, seed, length_tokens, i)
            out.append(
                Doc(
                    f"{self.name}-{length_tokens}-{seed}-{i}",
                    self.name,
                    r["context"],
                    question.fill(obj=obj),
                    str(r["answer"]),
                    task="qa",
                    max_answer_tokens=8,
                    evidence=evidence,
                    meta={
                        "seed": seed,
                        "length": length_tokens,
                        "object": obj,
                        "hops": hops,
                        **wordings.record(templates, [("question", question)]),
                    },
                )
            )
        return out

    def resolve(self, doc: Doc, items: Located, stage: str) -> Finding:
        if not items:
            return self.nothing(doc)
        facts = [ev.text for _, ev in items]
        obj = doc.meta["object"]
        part_of = {ev.text: p for p, ev in items}
        extracted = " ".join(dict.fromkeys(facts))
        code = multihop.resolve(facts, obj)
        names = multihop.chain_names(facts, obj)
        if code is not None:
            steps = [f for f in facts if _on_chain(f, obj, names)]
            chain = "; ".join(
                f if stage == "map" else f"{f} (part {part_of[f] + 1})"
                for f in _chain_order(steps, obj)
            )
            return Finding(
                extracted,
                f"Following the chain: {chain}. So the {obj} code is {code}.",
                code,
                CONFIDENCE["direct"],
            )
        if names:
            return Finding(
                extracted,
                f"The {obj} code is reached through the note about {names[-1]}, "
                "which these parts do not give.",
                f"in the note about {names[-1]}",
                CONFIDENCE["link"],
            )
        # only notes whose place on the chain is unknown here
        ranked = sorted(items, key=lambda pe: pe[0])
        return Finding(
            extracted,
            f"These notes do not say which of them the {obj} code leads to; "
            "other parts must link them.",
            "; ".join(dict.fromkeys(ev.answer for _, ev in ranked)),
            CONFIDENCE["inferred"],
        )


def _on_chain(fact: str, obj: str, names: Sequence[str]) -> bool:
    m = multihop.FACT.fullmatch(fact)
    if m is None:
        return False
    return m.group("obj") == obj or (m.group("mid") or m.group("tail")) in names


def _chain_order(steps: Sequence[str], obj: str) -> list[str]:
    names = multihop.chain_names(steps, obj)
    rank = {n: i for i, n in enumerate(names)}

    def key(f: str) -> int:
        m = multihop.FACT.fullmatch(f)
        assert m is not None
        if m.group("obj"):
            return -1
        return rank.get(m.group("mid") or m.group("tail"), 99)

    return sorted(steps, key=key)
