"""The needle families: one sentence holds the answer among filler
(:mod:`chunkwise.data.synthetic`'s passkey, number_string and kv_retrieval documents)."""

from __future__ import annotations

import re

from chunkwise.data import synthetic
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
        self, *, n: int, seed: int, length_tokens: int, count_tokens: CountTokens
    ) -> list[Doc]:
        recs = synthetic.generate(
            self.task_name, length_tokens=length_tokens, n=n, seed=seed, count_tokens=count_tokens
        )
        out = []
        for r in recs:
            key = str(r["answer"][0])
            sentence = self.needle.format(key=key).strip()
            s, e = evidence_span(r["context"], sentence, self.name)
            out.append(
                Doc(
                    f"{self.name}-{length_tokens}-{seed}-{r['id']}",
                    self.name,
                    r["context"],
                    r["input"],
                    key,
                    answer_prefix=self.prefix,
                    max_answer_tokens=12,
                    evidence=[Evidence(s, e, "direct", sentence, key)],
                    meta={"seed": seed, "length": length_tokens},
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
        self, *, n: int, seed: int, length_tokens: int, count_tokens: CountTokens
    ) -> list[Doc]:
        recs = synthetic.generate(
            "kv_retrieval", length_tokens=length_tokens, n=n, seed=seed, count_tokens=count_tokens
        )
        out = []
        for r in recs:
            key = re.search(r'Key: "([^"]+)"', r["input"]).group(1)  # type: ignore[union-attr]
            value = str(r["answer"][0])
            pair = f'"{key}": "{value}"'
            s, e = evidence_span(r["context"], pair, self.name)
            out.append(
                Doc(
                    f"{self.name}-{length_tokens}-{seed}-{r['id']}",
                    self.name,
                    r["context"],
                    f'What is the value associated with the key "{key}" in the JSON data?',
                    value,
                    max_answer_tokens=40,
                    evidence=[Evidence(s, e, "direct", pair, value)],
                    meta={"seed": seed, "length": length_tokens, "key": key},
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
