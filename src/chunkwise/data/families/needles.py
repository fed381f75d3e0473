"""The needle families: one sentence holds the answer among filler
(:mod:`chunkwise.data.synthetic`'s passkey, number_string and kv_retrieval documents), worded
by :mod:`.wordings`: the needle sentence and the question of passkey and number_string, the
question of kv_retrieval (its evidence is a JSON pair)."""

from __future__ import annotations

import re

from chunkwise.data import synthetic
from chunkwise.data.families import wordings
from chunkwise.data.families.base import (
    CountTokens,
    Doc,
    Evidence,
    Family,
    Finding,
    evidence_span,
)


class _Needle(Family):
    unanswerable_variants = True
    task_name = ""
    needle = ""
    prefix = ""

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
        recs = synthetic.generate(
            self.task_name, length_tokens=length_tokens, n=n, seed=seed, count_tokens=count_tokens
        )
        out = []
        for r in recs:
            key = str(r["answer"][0])
            at = (seed, length_tokens, int(r["id"]))
            question = wordings.pick(self.name, "question", templates, *at)
            needle = wordings.pick(self.name, "needle", templates, *at)
            # the generator's needle, reworded in place: filler, key and depth stay as they were
            built = self.needle.format(key=key).strip()
            sentence = needle.fill(key=key)
            s, _ = evidence_span(r["context"], built, self.name)
            context = r["context"][:s] + sentence + r["context"][s + len(built) :]
            s, e = evidence_span(context, sentence, self.name)
            out.append(
                Doc(
                    f"{self.name}-{length_tokens}-{seed}-{r['id']}",
                    self.name,
                    context,
                    question.fill(),
                    key,
                    answer_prefix=self.prefix,
                    max_answer_tokens=12,
                    evidence=[Evidence(s, e, "direct", sentence, key)],
                    meta={
                        "seed": seed,
                        "length": length_tokens,
                        **wordings.record(templates, [("question", question), ("needle", needle)]),
                    },
                )
            )
        return out


class Passkey(_Needle):
    name = task_name = "passkey"
    topic = "a pass key"
    needle = synthetic.PASSKEY_NEEDLE
    prefix = "The pass key is"


class NumberString(_Needle):
    name = task_name = "number_string"
    topic = "a sequence of digits"
    needle = synthetic.NUMBER_NEEDLE
    prefix = "The sequence of digits is"


class KVRetrieval(Family):
    unanswerable_variants = True
    name = "kv_retrieval"
    topic = "the value of one key"

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
        recs = synthetic.generate(
            "kv_retrieval", length_tokens=length_tokens, n=n, seed=seed, count_tokens=count_tokens
        )
        out = []
        for r in recs:
            key = re.search(r'Key: "([^"]+)"', r["input"]).group(1)  # type: ignore[union-attr]
            value = str(r["answer"][0])
            pair = f'"{key}": "{value}"'
            s, e = evidence_span(r["context"], pair, self.name)
            question = wordings.pick(
                self.name, "question", templates, seed, length_tokens, int(r["id"])
            )
            out.append(
                Doc(
                    f"{self.name}-{length_tokens}-{seed}-{r['id']}",
                    self.name,
                    r["context"],
                    question.fill(key=key),
                    value,
                    max_answer_tokens=40,
                    evidence=[Evidence(s, e, "direct", pair, value)],
                    meta={
                        "seed": seed,
                        "length": length_tokens,
                        "key": key,
                        **wordings.record(templates, [("question", question)]),
                    },
                )
            )
        return out

    def nothing(self, doc: Doc) -> Finding:
        """An empty part restates the key as the JSON writes it, ``"KEY": not in this part.``,
        so a finding (``"KEY": "VALUE"``) and an empty record share their first tokens and part
        ways only after the key: the model decides by copying what follows the key in the
        chunk, if anything, rather than before it has written the key down. Measured with
        ``bench/decision_probe.py``: a decision taken before the key (``Nothing in this part
        ...``) was never learned; docs/log.md has the numbers."""
        found = super().nothing(doc)
        found.extracted_information = f'"{doc.meta["key"]}": not in this part.'
        return found
