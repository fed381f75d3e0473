"""A synthetic multi-hop task on which the reading order of a bounded-memory chain matters.

Each document is a list of *sections* separated by blank lines; each section holds one fact
sentence among a few filler sentences (the filler names nobody and holds no digits). The
question asks for the code of one object; the answer needs a chain of facts spread over
distant sections that refer to each other::

    The vault code is in the note about Odile.               (head: names the object)
    Note about Odile: its code is in the note about Bruno.   (middle hops, hops >= 3)
    Note about Bruno: the code is 4817.                      (tail: holds the answer)

Distractor chains of the same shape lead to other objects' codes, and filler sections hold no
fact at all. Section positions are shuffled, so the chain can appear in any order. A reader
whose memory holds only a few facts loses the tail when it reads it before it knows the tail
matters and later facts push it out: that is the loss the ordering has to prevent.

Records have the benchmark shape ``{id, context, input, answer, options}`` plus ``meta``:
``sections`` (the texts), ``chain`` (section indices head → tail), ``hops``, ``facts``
(section index → fact sentence) and ``seed``. :func:`chunk_tokens_for` gives the chunk size
that makes the chunker cut exactly one section per chunk for a given tokenizer.

:func:`memory_cap_reader` is a scripted reader for this task that keeps only what its memory
cap allows: it keeps the facts it knows are on the question's chain first, then the most
recently read other facts, while they fit. It plays the workers and the manager of the chat prompt
set (workers that rewrite the memory).
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Sequence
from typing import Any

from chunkwise.errors import BadInput

CountTokens = Callable[[str], int]

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

_SUBJECTS = (
    "the baker", "an old fisherman", "the night porter", "a travelling painter", "the miller",
    "a schoolteacher", "the ferryman", "two cousins", "the town clerk", "a gardener",
    "the innkeeper", "a young carpenter", "the postmistress", "a tired shepherd",
)  # fmt: skip
_VERBS = (
    "walked along", "painted", "swept", "argued about", "sang near", "repaired", "watched",
    "measured", "forgot about", "photographed", "cleaned", "described",
)  # fmt: skip
_PLACES = (
    "the river bank", "the market square", "the old bridge", "a windy hill", "the harbour wall",
    "the orchard", "the railway platform", "a muddy lane", "the village green", "the cliff path",
    "the crowded ferry", "the empty theatre",
)  # fmt: skip
_TIMES = (
    "in the morning", "after the rain", "before supper", "during the fair", "late at night",
    "at dawn", "on a grey afternoon", "while the bells rang", "in early spring", "all summer",
)  # fmt: skip


def _filler_sentence(rng: random.Random) -> str:
    s = rng.choice(_SUBJECTS)
    return f"{s[0].upper()}{s[1:]} {rng.choice(_VERBS)} {rng.choice(_PLACES)} {rng.choice(_TIMES)}."


def _chain_facts(obj: str, names: Sequence[str], code: str) -> list[str]:
    facts = [HEAD.format(obj=obj, name=names[0])]
    for a, b in itertools.pairwise(names):
        facts.append(MIDDLE.format(name=a, next=b))
    facts.append(TAIL.format(name=names[-1], code=code))
    return facts


def _section(rng: random.Random, fact: str | None, sentences: int) -> str:
    """A paragraph of ``sentences`` sentences: filler, with the fact (if any) counted as one
    of them, so sections are of similar length whether they hold a fact or not."""
    body = [_filler_sentence(rng) for _ in range(sentences - (fact is not None))]
    if fact is not None:
        body.insert(rng.randint(0, len(body)), fact)
    return " ".join(body)


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
        sections = [_section(rng, slot.get(p), section_sentences) for p in range(n_sections)]
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


def chunk_tokens_for(records: dict[str, Any] | Sequence[dict[str, Any]], count: CountTokens) -> int:
    """A chunk size that makes the chunker cut every given record into exactly one section
    per chunk: the largest section, valid while no two sections fit together."""
    recs = [records] if isinstance(records, dict) else list(records)
    sizes = [count(s) for r in recs for s in r["meta"]["sections"]]
    if 2 * min(sizes) <= max(sizes):
        raise BadInput(
            f"sections of {min(sizes)}..{max(sizes)} tokens are too uneven for one section per "
            "chunk; raise section_sentences"
        )
    return max(sizes)


def score(prediction: str, answer: str) -> float:
    """1.0 when the first four-digit number in the prediction is the answer."""
    m = re.search(r"\d{4}", prediction or "")
    return float(m is not None and m.group(0) == str(answer))


# --------------------------------------------------------------------------------------------
# a scripted reader that keeps only what its memory cap allows

_FACT = re.compile(
    r"The (?P<obj>[a-z]+) code is in the note about (?P<head>[A-Z][a-z]+)\."
    r"|Note about (?P<mid>[A-Z][a-z]+): its code is in the note about (?P<next>[A-Z][a-z]+)\."
    r"|Note about (?P<tail>[A-Z][a-z]+): the code is (?P<code>\d+)\."
)
_QUESTION = re.compile(r"What is the (?P<obj>[a-z]+) code\?")


def facts_in(text: str) -> list[str]:
    """The task's fact sentences in ``text``, in order."""
    return [m.group(0) for m in _FACT.finditer(text)]


def _links(facts: Sequence[str]) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    heads, nexts, codes = {}, {}, {}
    for f in facts:
        m = _FACT.fullmatch(f)
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


def keep_facts(
    memory: Sequence[str], new: Sequence[str], obj: str, cap: int, count: CountTokens
) -> list[str]:
    """What the capped reader keeps after reading ``new`` with ``memory`` in hand: facts on
    the question's chain as known so far (head first), then other facts, most recent first,
    each only while the joined notes stay within ``cap`` tokens. Kept facts stay in the order
    they were read."""
    pool = list(dict.fromkeys([*memory, *new]))  # read order, no repeats
    on_chain = set(chain_names(pool, obj))

    def relevant(f: str) -> bool:
        m = _FACT.fullmatch(f)
        if m is None:
            return False
        return m.group("obj") == obj or (m.group("mid") or m.group("tail")) in on_chain

    ranked = [f for f in pool if relevant(f)] + [f for f in reversed(pool) if not relevant(f)]
    kept: list[str] = []
    for f in ranked:
        trial = [g for g in pool if g in kept or g == f]
        if count(" ".join(trial)) <= cap:
            kept.append(f)
    return [f for f in pool if f in kept]


def memory_cap_reader(cap: int, window: int = 8192):
    """A :class:`~chunkwise.llm.scripted.ScriptedLLM` that plays both Chain-of-Agents roles on
    this task through the chat prompt set (whose workers rewrite the memory): as a worker it
    rewrites the notes with :func:`keep_facts` under ``cap`` tokens; as the manager it follows
    the chain in the notes and answers its code ("unknown" when the chain is broken)."""
    from chunkwise.llm.scripted import ScriptedLLM

    llm = ScriptedLLM(window=window)
    llm.chat = True

    def worker(m: re.Match[str]) -> str:
        q = _QUESTION.search(m.group("q"))
        obj = q.group("obj") if q else ""
        memory = facts_in(m.group("mem"))
        kept = keep_facts(memory, facts_in(m.group("chunk")), obj, cap, llm.count_tokens)
        return " ".join(kept) if kept else "(nothing yet)"

    def manager(m: re.Match[str]) -> str:
        q = _QUESTION.search(m.group("q"))
        code = resolve(facts_in(m.group("mem")), q.group("obj")) if q else None
        return f"Answer: {code or 'unknown'}"

    llm.rules = [
        (
            r"Question: (?P<q>[^\n]*)\n\n===== Notes from the previous reader =====\n"
            r"(?P<mem>.*?)\n===== This part of the document =====\n(?P<chunk>.*?)\n===== End",
            worker,
        ),
        (
            r"===== Notes =====\n(?P<mem>.*?)\n===== End of notes =====\n\nQuestion: (?P<q>[^\n]*)",
            manager,
        ),
    ]
    llm.__post_init__()  # compile the rules
    return llm


__all__ = [
    "NAMES",
    "OBJECTS",
    "QUESTION",
    "chain_names",
    "chunk_tokens_for",
    "facts_in",
    "generate",
    "keep_facts",
    "memory_cap_reader",
    "resolve",
    "score",
]
