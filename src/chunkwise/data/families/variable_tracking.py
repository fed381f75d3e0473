"""The variable_tracking family: ``VAR A = 12345`` then ``VAR B = VAR A`` ... among noise
lines (RULER's variable tracking), with a distractor chain from another value."""

from __future__ import annotations

import itertools
import random
import re
import string

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
    evidence_span,
)


class VariableTracking(Family):
    """``VAR A = 12345`` then ``VAR B = VAR A`` ... among noise lines; which variables hold the
    value? A distractor chain starts from another value."""

    name = "variable_tracking"
    topic = "variable assignments"
    _ASSIGN = re.compile(r"VAR ([A-Z]{5}) = (?:VAR ([A-Z]{5})|(\d{5}))\.")

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
            names = _names(rng, 8)
            value, other = rng.sample(range(10000, 100000), 2)
            hops = rng.choice((2, 3, 4))
            chain = names[:hops]
            decoy = names[hops : hops + 2]
            stmts = [f"VAR {chain[0]} = {value}."]
            stmts += [f"VAR {b} = VAR {a}." for a, b in itertools.pairwise(chain)]
            dstmts = [f"VAR {decoy[0]} = {other}.", f"VAR {decoy[1]} = VAR {decoy[0]}."]
            # chain statements in order at increasing positions, decoys anywhere
            slots = sorted(rng.sample(range(lines), len(stmts)))
            placed = dict(zip(slots, stmts, strict=True))
            for st in dstmts:
                free = [k for k in range(lines) if k not in placed]
                placed[rng.choice(free)] = st
            body = []
            for k in range(lines):
                body.append(synthetic.NOISE)
                if k in placed:
                    body.append(placed[k] + "\n")
            context = "".join(body)
            evidence = []
            for st in [*stmts, dstmts[1]]:  # the decoy head names another value: not evidence
                s, e = evidence_span(context, st, self.name)
                m = self._ASSIGN.fullmatch(st)
                assert m is not None
                if m.group(3):
                    evidence.append(Evidence(s, e, "direct", st, m.group(1), (m.group(1), "")))
                else:
                    ans = f"{m.group(1)}, if {m.group(2)} holds {value}"
                    evidence.append(Evidence(s, e, "inferred", st, ans, (m.group(1), m.group(2))))
            question = wordings.pick(self.name, "question", templates, seed, length_tokens, i)
            out.append(
                Doc(
                    f"{self.name}-{length_tokens}-{seed}-{i}",
                    self.name,
                    context,
                    question.fill(value=value),
                    ", ".join(chain),
                    max_answer_tokens=32,
                    evidence=evidence,
                    meta={
                        "seed": seed,
                        "length": length_tokens,
                        "value": value,
                        **wordings.record(templates, [("question", question)]),
                    },
                )
            )
        return out

    def score(self, doc: Doc, prediction: str) -> float:
        """Fraction of the assigned variables named (RULER's recall), 0 if any other is."""
        gold = set(doc.answer.split(", "))
        named = set(re.findall(r"\b[A-Z]{5}\b", prediction))
        return 0.0 if named - gold else len(named & gold) / len(gold)

    def resolve(self, doc: Doc, items: Located, stage: str) -> Finding:
        if not items:
            return self.nothing(doc)
        extracted = " ".join(dict.fromkeys(ev.text for _, ev in items))
        roots = [ev.data[0] for _, ev in items if not ev.data[1]]
        links = {ev.data[0]: ev.data[1] for _, ev in items if ev.data[1]}
        if roots:
            held = list(roots)
            grew = True
            while grew:
                grew = False
                for dst, src in links.items():
                    if src in held and dst not in held:
                        held.append(dst)
                        grew = True
            return Finding(
                extracted,
                f"{held[0]} is assigned {doc.meta['value']} directly"
                + ("; " + "; ".join(f"{d} copies {links[d]}" for d in held[1:]) if held[1:] else "")
                + ".",
                ", ".join(held),
                CONFIDENCE["direct"],
            )
        ranked = sorted(items, key=lambda pe: pe[0])
        return Finding(
            extracted,
            f"These assignments copy other variables; whether those hold {doc.meta['value']} "
            "is decided in other parts.",
            "; ".join(ev.answer for _, ev in ranked),
            CONFIDENCE["inferred"],
        )


def _names(rng: random.Random, k: int) -> list[str]:
    seen: list[str] = []
    while len(seen) < k:
        w = "".join(rng.choice(string.ascii_uppercase) for _ in range(5))
        if w not in seen:
            seen.append(w)
    return seen
