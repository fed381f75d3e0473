"""Generated document families with ground truth down to the evidence, for the oracle teacher.

Each family builds documents whose answer is known *and* whose evidence is known: every
sentence that bears on the question, where it sits, what it says, and how reliable it is. The
oracle teacher (:mod:`chunkwise.synth.oracle`) asks a family, for each chunk MapReduce reads,
which evidence the chunk holds (:meth:`Family.evidence_in`) and what a set of evidence supports
(:meth:`Family.resolve`): that is the map target of one chunk, the collapse target of a group
and the reduce target of the whole, so the three stay consistent by construction.

Evidence carries a *kind*, and the kind fixes its confidence (the calibration rule the map
prompt teaches): a direct statement of the answer scores 5; a part of the answer that is stated
but incomplete (a local maximum, a link of a chain) scores 4 or 3; a fact whose relevance must
be inferred 2.5; a hedged claim 2; an unreliable source 1.5; a retracted claim 1; nothing 0.

Families: passkey, number_string, kv_retrieval, math_find (largest / smallest), multihop (fact
chains, :mod:`chunkwise.data.multihop`), variable_tracking, conflicting (one plain statement
against a hedged, unreliable or retracted one) and extractive_qa (spans of Python's own
reference text, ``pydoc_data.topics``, PSF License).
"""

from __future__ import annotations

import hashlib
import itertools
import random
import re
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from chunkwise.data import multihop, synthetic
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
        self, *, n: int, seed: int, length_tokens: int, count_tokens: CountTokens
    ) -> list[Doc]:
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
    #: (not so where every part holds candidates, as in math_find's lists, or where real text
    #: may say the same thing twice, as in extractive_qa)
    unanswerable_variants: ClassVar[bool] = False

    def without_evidence(self, doc: Doc) -> Doc | None:
        """``doc`` with its evidence cut out: the same question, no answer in the text, so every
        part is empty and the reduce must say ``[NO INFORMATION]`` (None where the family has
        no such variant)."""
        if not self.unanswerable_variants or not doc.evidence:
            return None
        text = doc.context
        for ev in sorted(doc.evidence, key=lambda e: e.start, reverse=True):
            text = _cut(text, ev.start, ev.end)
        return replace(
            doc, id=f"{doc.id}-none", context=text, answer=NO_INFO, evidence=[],
            meta={**doc.meta, "unanswerable": True},
        )  # fmt: skip

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


def _span(context: str, text: str, where: str) -> tuple[int, int]:
    at = context.find(text)
    if at < 0:
        raise AssertionError(f"{where}: evidence {text!r} not in the document")
    return at, at + len(text)


# -- needle families ------------------------------------------------------------------------


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
            s, e = _span(r["context"], sentence, self.name)
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
            s, e = _span(r["context"], pair, self.name)
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


class MathFind(Family):
    """The largest or smallest number of a long list: each part reports its own extreme."""

    name = "math_find"
    topic = "a list of numbers"
    KINDS: ClassVar[dict[str, Callable[..., int]]] = {"largest number": max, "smallest number": min}

    def make(
        self, *, n: int, seed: int, length_tokens: int, count_tokens: CountTokens
    ) -> list[Doc]:
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
            out.append(
                Doc(
                    f"{self.name}-{length_tokens}-{seed}-{r['id']}",
                    self.name,
                    r["context"],
                    f"What is the {what} in the list?",
                    str(int(r["answer"][0])),
                    task="math",
                    max_answer_tokens=8,
                    meta={"seed": seed, "length": length_tokens, "what": what},
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


# -- chains ----------------------------------------------------------------------------------


class MultiHop(Family):
    """Fact chains (:mod:`chunkwise.data.multihop`): a head names the note holding the code,
    middle notes point on, the tail note holds the code; distractor chains look the same."""

    name = "multihop"
    topic = "the chain of notes leading to a code"

    def make(
        self, *, n: int, seed: int, length_tokens: int, count_tokens: CountTokens
    ) -> list[Doc]:
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
                m = multihop._FACT.fullmatch(fact)
                assert m is not None
                if m.group("obj") and m.group("obj") != obj:
                    continue  # another object's head: not about this question
                s, e = _span(r["context"], fact, self.name)
                if m.group("obj"):
                    ev = Evidence(s, e, "link", fact, f"in the note about {m.group('head')}")
                elif m.group("mid"):
                    ans = f"in the note about {m.group('next')}, if the note about {m.group('mid')} is on the chain"
                    ev = Evidence(s, e, "inferred", fact, ans)
                else:
                    ans = f"{m.group('code')}, if the note about {m.group('tail')} is on the chain"
                    ev = Evidence(s, e, "inferred", fact, ans)
                evidence.append(ev)
            out.append(
                Doc(
                    f"{self.name}-{length_tokens}-{seed}-{i}",
                    self.name,
                    r["context"],
                    r["input"],
                    str(r["answer"]),
                    task="qa",
                    max_answer_tokens=8,
                    evidence=evidence,
                    meta={"seed": seed, "length": length_tokens, "object": obj, "hops": hops},
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
    m = multihop._FACT.fullmatch(fact)
    if m is None:
        return False
    return m.group("obj") == obj or (m.group("mid") or m.group("tail")) in names


def _chain_order(steps: Sequence[str], obj: str) -> list[str]:
    names = multihop.chain_names(steps, obj)
    rank = {n: i for i, n in enumerate(names)}

    def key(f: str) -> int:
        m = multihop._FACT.fullmatch(f)
        assert m is not None
        if m.group("obj"):
            return -1
        return rank.get(m.group("mid") or m.group("tail"), 99)

    return sorted(steps, key=key)


class VariableTracking(Family):
    """``VAR A = 12345`` then ``VAR B = VAR A`` ... among noise lines; which variables hold the
    value? A distractor chain starts from another value."""

    name = "variable_tracking"
    topic = "variable assignments"
    _ASSIGN = re.compile(r"VAR ([A-Z]{5}) = (?:VAR ([A-Z]{5})|(\d{5}))\.")

    def make(
        self, *, n: int, seed: int, length_tokens: int, count_tokens: CountTokens
    ) -> list[Doc]:
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
                s, e = _span(context, st, self.name)
                m = self._ASSIGN.fullmatch(st)
                assert m is not None
                if m.group(3):
                    evidence.append(Evidence(s, e, "direct", st, m.group(1), (m.group(1), "")))
                else:
                    ans = f"{m.group(1)}, if {m.group(2)} holds {value}"
                    evidence.append(Evidence(s, e, "inferred", st, ans, (m.group(1), m.group(2))))
            out.append(
                Doc(
                    f"{self.name}-{length_tokens}-{seed}-{i}",
                    self.name,
                    context,
                    f"Which variables are assigned the value {value}?",
                    ", ".join(chain),
                    max_answer_tokens=32,
                    evidence=evidence,
                    meta={"seed": seed, "length": length_tokens, "value": value},
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


# -- conflicting evidence -------------------------------------------------------------------

_THINGS = (
    "reactor", "ferry", "museum", "depot", "hangar", "clinic", "orchard", "quarry", "mill",
    "signal box", "pump house", "weather station",
)  # fmt: skip
_PLAIN = "The access code of the {thing} is {code}."
_WEAK = {
    "hedged": "Someone once guessed that the access code of the {thing} might be {code}, "
    "though nobody ever checked.",
    "unreliable": "A rumour passed around by strangers claims the access code of the {thing} "
    "is {code}.",
    "retracted": "An early memo listed the access code of the {thing} as {code}; the memo was "
    "later withdrawn as wrong.",
}


class Conflicting(Family):
    """The same fact stated plainly in one place and, differently, by a hedged, unreliable or
    retracted source in another: the plain statement is the answer."""

    name = "conflicting"
    unanswerable_variants = True
    topic = "an access code"

    def make(
        self, *, n: int, seed: int, length_tokens: int, count_tokens: CountTokens
    ) -> list[Doc]:
        rng = random.Random(seed)
        line_tokens = max(1, count_tokens(synthetic.NOISE))
        lines = max(8, length_tokens // line_tokens)
        out = []
        for i in range(n):
            thing = rng.choice(_THINGS)
            true, false = (str(c) for c in rng.sample(range(1000, 10000), 2))
            weak_kind = ("hedged", "unreliable", "retracted")[i % 3]
            plain = _PLAIN.format(thing=thing, code=true)
            weak = _WEAK[weak_kind].format(thing=thing, code=false)
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
            ps, pe = _span(context, plain, self.name)
            ws, we = _span(context, weak, self.name)
            out.append(
                Doc(
                    f"{self.name}-{length_tokens}-{seed}-{i}",
                    self.name,
                    context,
                    f"What is the access code of the {thing}?",
                    true,
                    max_answer_tokens=8,
                    evidence=[
                        Evidence(ps, pe, "direct", plain, true),
                        Evidence(ws, we, weak_kind, weak, false),
                    ],
                    meta={"seed": seed, "length": length_tokens, "weak": weak_kind},
                )
            )
        return out


# -- extractive QA over real text ----------------------------------------------------------


#: a sentence of the language reference a span question may quote: plain words on one line
_SPAN_SENTENCE = re.compile(r"[A-Z][a-z][a-z ,]{40,200}[a-z]\.")
#: the same across the reference's hard line wraps (not across a blank line): ~12x as many
_WRAPPED_SENTENCE = re.compile(r"(?<![\w-])[A-Z][a-z](?:[a-z ,]|\n(?!\n)){40,200}[a-z]\.")


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


#: one sentence of the reference in SPAN_HELDOUT_EVERY is asked about only in held-out
#: documents: training and evaluation share the reference's text (no loss falls on it) but
#: never a question or an answer
SPAN_HELDOUT_EVERY = 4
SPLITS = ("train", "heldout")


def span_split(words: Sequence[str]) -> str:
    """``"train"`` or ``"heldout"``: the split a span question over a sentence whose first ten
    words are ``words`` belongs to (a hash of those words, whatever whitespace the text has
    between them)."""
    digest = hashlib.sha256(" ".join(words[:10]).encode()).digest()
    return "heldout" if int.from_bytes(digest[:4], "big") % SPAN_HELDOUT_EVERY == 0 else "train"


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
            s, e = _span(context, span_text, ExtractiveQA.name)
        question = f'Which four words come right after "{prefix}" in the document?'
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

    def make(
        self, *, n: int, seed: int, length_tokens: int, count_tokens: CountTokens
    ) -> list[Doc]:
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
                meta = {"seed": seed, "length": length_tokens, "split": split}
                out.append(
                    self.doc(f"{self.name}-{length_tokens}-{seed}-{i}", context, question, ev, meta)
                )
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


#: the split `make default-mr` trains on and bench/mr_trained.py evaluates on: training uses
#: TRAIN_SEED at TRAIN_LENGTHS for every family but HELDOUT_FAMILY; evaluation uses seeds from
#: HELDOUT_SEED (never trained on) at any length, and HELDOUT_FAMILY entirely
TRAIN_SEED = 0
TRAIN_LENGTHS = (2000, 3000, 4000)
HELDOUT_FAMILY = "variable_tracking"
HELDOUT_SEED = 100_000

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Passkey(),
        NumberString(),
        KVRetrieval(),
        MathFind(),
        MultiHop(),
        VariableTracking(),
        Conflicting(),
        ExtractiveQA(),
    )
}


def train_families() -> list[str]:
    return [f for f in FAMILIES if f != HELDOUT_FAMILY]


def get_family(name: str) -> Family:
    if name not in FAMILIES:
        raise BadInput(f"unknown document family {name!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[name]


__all__ = [
    "CONFIDENCE",
    "FAMILIES",
    "HELDOUT_FAMILY",
    "HELDOUT_SEED",
    "SPAN_HELDOUT_EVERY",
    "TRAIN_LENGTHS",
    "TRAIN_SEED",
    "Doc",
    "Evidence",
    "Family",
    "Finding",
    "get_family",
    "span_questions",
    "span_split",
    "train_families",
]
