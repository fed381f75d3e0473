"""Chain documents: the code of one object is reached through a chain of facts spread over
distant sections (head -> middle notes -> tail), among distractor chains; and the rules that
read such a chain from a set of facts."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Sequence
from typing import Any

from chunkwise.data.multihop.sections import section
from chunkwise.errors import BadInput

OBJECTS = (
    "vault", "archive", "greenhouse", "observatory", "boathouse", "pharmacy", "armory",
    "bakery", "chapel", "library", "lighthouse", "workshop", "cellar", "garage", "studio",
    "stable", "granary", "laboratory", "mailroom", "attic", "tower", "kiosk", "gallery",
    "foundry",
)  # fmt: skip
NAMES = (
    "Odile", "Bruno", "Marisol", "Tobias", "Ingrid", "Casimir", "Leocadia", "Rufus",
    "Henrietta", "Ambrose", "Philippa", "Octavio", "Wilhelmina", "Lazlo", "Perpetua",
    "Silvestre", "Gwendolyn", "Barnaby", "Eulalia", "Thaddeus", "Rosalind", "Ignatius",
    "Clementine", "Fergus", "Ottoline", "Percival", "Isolde", "Cornelius", "Beatrix",
    "Evander", "Seraphina", "Quentin", "Ludmila", "Horatio", "Zenobia", "Leopold",
    "Araminta", "Crispin", "Dorothea", "Peregrine", "Winifred", "Magnus", "Euphemia",
    "Ptolemy", "Griselda", "Alaric", "Philomena", "Benedikt",
)  # fmt: skip

HEAD = "The {obj} code is in the note about {name}."
MIDDLE = "Note about {name}: its code is in the note about {next}."
TAIL = "Note about {name}: the code is {code}."
QUESTION = "What is the {obj} code?"


def _chain_facts(obj: str, names: Sequence[str], code: str) -> list[str]:
    facts = [HEAD.format(obj=obj, name=names[0])]
    for a, b in itertools.pairwise(names):
        facts.append(MIDDLE.format(name=a, next=b))
    facts.append(TAIL.format(name=names[-1], code=code))
    return facts


def generate(
    *,
    n: int,
    seed: int = 0,
    hops: int = 2,
    distractor_chains: int = 2,
    filler_sections: int = 2,
    section_sentences: int = 2,
    min_gap: int = 2,
) -> list[dict[str, Any]]:
    """``n`` multi-hop records (see the module docstring).

    ``hops``: facts on the answer's chain (2 = head + tail). A document has
    ``hops * (1 + distractor_chains) + filler_sections`` sections of ``section_sentences``
    sentences each (a fact is one of them). ``min_gap``: consecutive facts of the answer's chain
    sit at least this many sections apart (when the document allows it).
    """
    if n < 1:
        raise BadInput(f"n must be at least 1, got {n}")
    if section_sentences < 2:
        raise BadInput(f"section_sentences must be at least 2, got {section_sentences}")
    if hops < 2:
        raise BadInput(f"hops must be at least 2 (a head and a tail), got {hops}")
    chains = 1 + distractor_chains
    if chains > len(OBJECTS) or chains * (hops - 1) > len(NAMES):
        raise BadInput(
            f"{chains} chains of {hops} hops need more objects or names than the generator has"
        )
    rng = random.Random(seed)
    records = []
    for i in range(n):
        objs = rng.sample(OBJECTS, chains)
        names = rng.sample(NAMES, chains * (hops - 1))
        codes = [str(c) for c in rng.sample(range(1000, 10000), chains)]
        # a chain of `hops` facts names hops - 1 notes
        facts = [
            _chain_facts(objs[c], names[c * (hops - 1) : (c + 1) * (hops - 1)], codes[c])
            for c in range(chains)
        ]
        n_sections = chains * hops + filler_sections
        positions = _place_chain(rng, n_sections, hops, min_gap)
        rest = [p for p in range(n_sections) if p not in positions]
        rng.shuffle(rest)
        slot: dict[int, str] = dict(zip(positions, facts[0], strict=True))
        others = [f for chain in facts[1:] for f in chain]
        for p, f in zip(rest, others, strict=False):
            slot[p] = f
        sections = [section(rng, slot.get(p), section_sentences) for p in range(n_sections)]
        records.append(
            {
                "id": f"multihop-{seed}-{i}",
                "context": "\n\n".join(sections),
                "input": QUESTION.format(obj=objs[0]),
                "answer": codes[0],
                "options": [],
                "meta": {
                    "sections": sections,
                    "chain": positions,
                    "hops": hops,
                    "facts": {str(p): f for p, f in sorted(slot.items())},
                    "distractor_answers": codes[1:],
                    "seed": seed,
                },
            }
        )
    return records


def _place_chain(rng: random.Random, n_sections: int, hops: int, min_gap: int) -> list[int]:
    """Section indices for the chain head → tail, pairwise at least ``min_gap`` apart when
    possible, in a random order within the document."""
    gap = min_gap
    while gap > 0:
        for _ in range(200):
            picked = sorted(rng.sample(range(n_sections), hops))
            if all(b - a >= gap for a, b in itertools.pairwise(picked)):
                rng.shuffle(picked)
                return picked
        gap -= 1
    picked = rng.sample(range(n_sections), hops)
    return picked


def score(prediction: str, answer: str) -> float:
    """1.0 when the first four-digit number in the prediction is the answer."""
    m = re.search(r"\d{4}", prediction or "")
    return float(m is not None and m.group(0) == str(answer))


#: a fact sentence of any chain: a head (obj, head), a middle note (mid, next) or a tail (tail, code)
FACT = re.compile(
    r"The (?P<obj>[a-z]+) code is in the note about (?P<head>[A-Z][a-z]+)\."
    r"|Note about (?P<mid>[A-Z][a-z]+): its code is in the note about (?P<next>[A-Z][a-z]+)\."
    r"|Note about (?P<tail>[A-Z][a-z]+): the code is (?P<code>\d+)\."
)
#: the question of a chain document (obj)
CHAIN_QUESTION = re.compile(r"What is the (?P<obj>[a-z]+) code\?")


def facts_in(text: str) -> list[str]:
    """The task's fact sentences in ``text``, in order."""
    return [m.group(0) for m in FACT.finditer(text)]


def _links(facts: Sequence[str]) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    heads, nexts, codes = {}, {}, {}
    for f in facts:
        m = FACT.fullmatch(f)
        if m is None:
            continue
        if m.group("obj"):
            heads[m.group("obj")] = m.group("head")
        elif m.group("mid"):
            nexts[m.group("mid")] = m.group("next")
        else:
            codes[m.group("tail")] = m.group("code")
    return heads, nexts, codes


def chain_names(facts: Sequence[str], obj: str) -> list[str]:
    """The names reachable from ``obj`` through ``facts`` (head first)."""
    heads, nexts, _ = _links(facts)
    out: list[str] = []
    name = heads.get(obj)
    while name is not None and name not in out:
        out.append(name)
        name = nexts.get(name)
    return out


def resolve(facts: Sequence[str], obj: str) -> str | None:
    """The code of ``obj`` if ``facts`` hold its whole chain, else None."""
    _, _, codes = _links(facts)
    names = chain_names(facts, obj)
    return codes.get(names[-1]) if names else None
