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

**Trees.** :func:`generate_tree` builds documents whose dependency structure is a tree, not a
chain: variable assignments (RULER's variable tracking) where one root variable holds a value
and ``branches`` chains of ``depth`` variables each copy it from the root::

    VAR QKZTB = 48213.            root
    VAR HJWLM = VAR QKZTB.        branch 1, depth 1        VAR PLMNB = VAR QKZTB.   branch 2
    VAR ASDFG = VAR HJWLM.        branch 1, depth 2        VAR CVBNX = VAR PLMNB.

among distractor trees of the same shape holding other values, one fact per section. Two
questions: ``all`` ("Which variables are assigned the value 48213?": every branch and the
root) and ``leaf`` ("Which value is VAR ASDFG assigned?": the root and one branch). A reader
that knows which facts matter only once it has read the fact they hang from keeps the answer's
tree under a tight memory when it reads parents before children; a breadth-first walk from
the root does, a greedy chain through the document does not always. :func:`tree_reader` is the
scripted capped reader for these documents (same prompt set and rules as
:func:`memory_cap_reader`).
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


def _keep_within(
    pool: Sequence[str], relevant: Callable[[str], bool], cap: int, count: CountTokens
) -> list[str]:
    """The capped reader's rule: the relevant facts of ``pool`` (read order) first, then the
    others, most recent first, each only while the joined notes stay within ``cap`` tokens;
    the kept facts in read order."""
    ranked = [f for f in pool if relevant(f)] + [f for f in reversed(pool) if not relevant(f)]
    kept: list[str] = []
    for f in ranked:
        trial = [g for g in pool if g in kept or g == f]
        if count(" ".join(trial)) <= cap:
            kept.append(f)
    return [f for f in pool if f in kept]


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

    return _keep_within(pool, relevant, cap, count)


def _capped_reader(
    worker: Callable[[str, str, str], str], manager: Callable[[str, str], str], window: int
):
    """A scripted chat model playing both Chain-of-Agents roles of the chat prompt set:
    ``worker(question, memory, chunk)`` writes the new notes, ``manager(question, memory)``
    the answer."""
    from chunkwise.llm.scripted import ScriptedLLM

    llm = ScriptedLLM(window=window)
    llm.chat = True
    llm.rules = [
        (
            r"Question: (?P<q>[^\n]*)\n\n===== Notes from the previous reader =====\n"
            r"(?P<mem>.*?)\n===== This part of the document =====\n(?P<chunk>.*?)\n===== End",
            lambda m: worker(m.group("q"), m.group("mem"), m.group("chunk")),
        ),
        (
            r"===== Notes =====\n(?P<mem>.*?)\n===== End of notes =====\n\nQuestion: (?P<q>[^\n]*)",
            lambda m: manager(m.group("q"), m.group("mem")),
        ),
    ]
    llm.__post_init__()  # compile the rules
    return llm


def memory_cap_reader(cap: int, window: int = 8192):
    """A :class:`~chunkwise.llm.scripted.ScriptedLLM` that plays both Chain-of-Agents roles on
    this task through the chat prompt set (whose workers rewrite the memory): as a worker it
    rewrites the notes with :func:`keep_facts` under ``cap`` tokens; as the manager it follows
    the chain in the notes and answers its code ("unknown" when the chain is broken)."""
    llm: Any = None

    def worker(question: str, mem: str, chunk: str) -> str:
        q = _QUESTION.search(question)
        obj = q.group("obj") if q else ""
        kept = keep_facts(facts_in(mem), facts_in(chunk), obj, cap, llm.count_tokens)
        return " ".join(kept) if kept else "(nothing yet)"

    def manager(question: str, mem: str) -> str:
        q = _QUESTION.search(question)
        code = resolve(facts_in(mem), q.group("obj")) if q else None
        return f"Answer: {code or 'unknown'}"

    llm = _capped_reader(worker, manager, window)
    return llm


# --------------------------------------------------------------------------------------------
# trees: variables copied from one root along several branches

TREE_ROOT = "VAR {name} = {value}."
TREE_LINK = "VAR {name} = VAR {parent}."
TREE_QUESTIONS = {
    "all": "Which variables are assigned the value {value}?",
    "leaf": "Which value is VAR {name} assigned?",
}
_ASSIGN = re.compile(r"VAR (?P<name>[A-Z]{5}) = (?:VAR (?P<parent>[A-Z]{5})|(?P<value>\d{5}))\.")
TREE_QUESTION = _TREE_Q = re.compile(
    r"Which variables are assigned the value (?P<value>\d{5})\?"
    r"|Which value is VAR (?P<name>[A-Z]{5}) assigned\?"
)


def _var_names(rng: random.Random, k: int) -> list[str]:
    out: list[str] = []
    while len(out) < k:
        name = "".join(rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ", k=5))
        if name not in out:
            out.append(name)
    return out


def _tree(names: Sequence[str], value: int, branches: int, depth: int) -> list[tuple[str, str]]:
    """(variable, parent variable or the value) of one tree, root first, then each branch
    from the root outwards."""
    facts = [(names[0], str(value))]
    k = 1
    for _ in range(branches):
        parent = names[0]
        for _ in range(depth):
            facts.append((names[k], parent))
            parent = names[k]
            k += 1
    return facts


def generate_tree(
    *,
    n: int,
    seed: int = 0,
    question: str = "all",
    branches: int = 3,
    depth: int = 2,
    distractor_trees: int = 1,
    filler_sections: int = 2,
    section_sentences: int = 2,
) -> list[dict[str, Any]]:
    """``n`` records whose evidence is a tree (see the module docstring). Two branches make
    the tree a path through its root; three (the default) make it branch.

    A tree has ``1 + branches * depth`` facts; a document has that many for the answer's tree
    and for each of ``distractor_trees``, plus ``filler_sections`` sections without a fact, in
    a random order, one fact per section. ``question``: ``all`` (every variable of the tree:
    needs every branch) or ``leaf`` (the value of the last variable of one branch: needs the
    root and that branch).

    ``meta``: ``sections``, ``facts`` (section -> sentence), ``tree`` (section -> the section
    of the fact it copies from, None for the root), ``root`` (the root's section),
    ``evidence`` (the sections the answer needs, in the order a reader from the root meets
    them), ``question``, ``value``, ``variables`` (the tree's variables, root first),
    ``leaf`` (the asked variable for ``leaf``, else None), ``branches``, ``depth``, ``seed``.
    """
    if n < 1:
        raise BadInput(f"n must be at least 1, got {n}")
    if question not in TREE_QUESTIONS:
        raise BadInput(f"question {question!r}; valid: {', '.join(TREE_QUESTIONS)}")
    if branches < 2:
        raise BadInput(f"branches must be at least 2 (else the tree is a chain), got {branches}")
    if depth < 1:
        raise BadInput(f"depth must be at least 1, got {depth}")
    if section_sentences < 2:
        raise BadInput(f"section_sentences must be at least 2, got {section_sentences}")
    if distractor_trees < 0 or filler_sections < 0:
        raise BadInput("distractor_trees and filler_sections must be >= 0")
    rng = random.Random(seed)
    size = 1 + branches * depth
    trees = 1 + distractor_trees
    records = []
    for i in range(n):
        names = _var_names(rng, trees * size)
        values = rng.sample(range(10000, 100000), trees)
        facts = [
            _tree(names[t * size : (t + 1) * size], values[t], branches, depth)
            for t in range(trees)
        ]
        n_sections = trees * size + filler_sections
        positions = rng.sample(range(n_sections), trees * size)
        where = {}  # variable -> section
        slot: dict[int, str] = {}
        for (name, parent), p in zip((f for tree in facts for f in tree), positions, strict=True):
            where[name] = p
            slot[p] = (
                TREE_ROOT.format(name=name, value=parent)
                if parent.isdigit()
                else TREE_LINK.format(name=name, parent=parent)
            )
        answer_tree = facts[0]
        tree = {
            where[name]: (None if parent.isdigit() else where[parent])
            for name, parent in answer_tree
        }
        root = where[answer_tree[0][0]]
        variables = [name for name, _ in answer_tree]
        if question == "all":
            leaf = None
            asked = TREE_QUESTIONS["all"].format(value=values[0])
            answer = ", ".join(variables)
            evidence = _bfs(tree, root)
        else:
            b = rng.randrange(branches)
            leaf = answer_tree[b * depth + depth][0]
            asked = TREE_QUESTIONS["leaf"].format(name=leaf)
            answer = str(values[0])
            path = [where[leaf]]
            while tree[path[-1]] is not None:
                path.append(tree[path[-1]])  # type: ignore[arg-type]
            evidence = path[::-1]
        sections = [_section(rng, slot.get(p), section_sentences) for p in range(n_sections)]
        records.append(
            {
                "id": f"tree-{question}-{seed}-{i}",
                "context": "\n\n".join(sections),
                "input": asked,
                "answer": answer,
                "options": [],
                "meta": {
                    "sections": sections,
                    "facts": {str(p): f for p, f in sorted(slot.items())},
                    "tree": {str(k): v for k, v in sorted(tree.items())},
                    "root": root,
                    "evidence": evidence,
                    "question": question,
                    "value": values[0],
                    "variables": variables,
                    "leaf": leaf,
                    "branches": branches,
                    "depth": depth,
                    "distractor_values": values[1:],
                    "seed": seed,
                },
            }
        )
    return records


def _bfs(tree: dict[int, int | None], root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for child, parent in tree.items():
        if parent is not None:
            children.setdefault(parent, []).append(child)
    out, frontier = [root], [root]
    while frontier:
        frontier = [c for p in frontier for c in sorted(children.get(p, []))]
        out += frontier
    return out


def assignments_in(text: str) -> list[str]:
    """The tree task's assignment sentences in ``text``, in order."""
    return [m.group(0) for m in _ASSIGN.finditer(text)]


def _assign_links(facts: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    values, parents = {}, {}
    for f in facts:
        m = _ASSIGN.fullmatch(f)
        if m is None:
            continue
        if m.group("value"):
            values[m.group("name")] = m.group("value")
        else:
            parents[m.group("name")] = m.group("parent")
    return values, parents


def holders(facts: Sequence[str], value: str) -> list[str]:
    """The variables ``facts`` show to hold ``value`` (the roots first, then by reach)."""
    values, parents = _assign_links(facts)
    held = [v for v, x in values.items() if x == str(value)]
    grew = True
    while grew:
        grew = False
        for child, parent in parents.items():
            if parent in held and child not in held:
                held.append(child)
                grew = True
    return held


def value_of(facts: Sequence[str], name: str) -> str | None:
    """The value ``facts`` show ``name`` to hold, or None when its chain is broken."""
    values, parents = _assign_links(facts)
    seen: list[str] = []
    while name not in values:
        if name in seen or name not in parents:
            return None
        seen.append(name)
        name = parents[name]
    return values[name]


def _path_up(facts: Sequence[str], name: str) -> list[str]:
    """``name`` and the variables it copies from, as far as ``facts`` go."""
    _, parents = _assign_links(facts)
    out = [name]
    while out[-1] in parents and parents[out[-1]] not in out:
        out.append(parents[out[-1]])
    return out


def _tree_target(question: str) -> tuple[str | None, str | None]:
    m = _TREE_Q.search(question or "")
    if m is None:
        return None, None
    return m.group("value"), m.group("name")


def tree_answer(facts: Sequence[str], question: str) -> str | None:
    """What ``facts`` answer to a tree question: the holders of the value (comma-joined) or
    the leaf's value; None when they do not answer it."""
    value, name = _tree_target(question)
    if value is not None:
        held = holders(facts, value)
        return ", ".join(held) if held else None
    if name is not None:
        return value_of(facts, name)
    return None


def keep_tree_facts(
    memory: Sequence[str], new: Sequence[str], question: str, cap: int, count: CountTokens
) -> list[str]:
    """The capped reader's choice on a tree document: the facts known so far to bear on the
    question first (the value's holders for ``all``, the asked variable's path upwards for
    ``leaf``), then the others, most recent first, each while the notes fit in ``cap``
    tokens. Kept facts stay in the order they were read."""
    pool = list(dict.fromkeys([*memory, *new]))
    value, name = _tree_target(question)
    on = set(holders(pool, value)) if value is not None else set(_path_up(pool, name or ""))

    def relevant(f: str) -> bool:
        m = _ASSIGN.fullmatch(f)
        return m is not None and m.group("name") in on

    return _keep_within(pool, relevant, cap, count)


def tree_support(facts: Sequence[str], question: str) -> list[str]:
    """The assignments of ``facts`` an answer to a tree question follows, in read order: the
    value's holders' for ``all``, the asked variable's path upwards for ``leaf``."""
    value, name = _tree_target(question)
    on = set(holders(facts, value)) if value is not None else set(_path_up(facts, name or ""))
    return [f for f in facts if (m := _ASSIGN.fullmatch(f)) is not None and m.group("name") in on]


def tree_reader(cap: int, window: int = 8192):
    """The scripted capped reader for :func:`generate_tree` documents (chat prompt set): as a
    worker it keeps :func:`keep_tree_facts` under ``cap`` tokens; as the manager it answers
    from the notes ("unknown" when they do not answer)."""
    llm: Any = None

    def worker(question: str, mem: str, chunk: str) -> str:
        kept = keep_tree_facts(
            assignments_in(mem), assignments_in(chunk), question, cap, llm.count_tokens
        )
        return " ".join(kept) if kept else "(nothing yet)"

    def manager(question: str, mem: str) -> str:
        return f"Answer: {tree_answer(assignments_in(mem), question) or 'unknown'}"

    llm = _capped_reader(worker, manager, window)
    return llm


def tree_score(prediction: str, record: dict[str, Any]) -> float:
    """1.0 for a right answer: for ``all``, exactly the tree's variables named (any order, no
    other); for ``leaf``, the value as the first five-digit number."""
    if record["meta"]["question"] == "all":
        named = set(re.findall(r"\b[A-Z]{5}\b", prediction or ""))
        return float(named == set(record["meta"]["variables"]))
    m = re.search(r"\d{5}", prediction or "")
    return float(m is not None and m.group(0) == str(record["answer"]))


def tree_recall(prediction: str, record: dict[str, Any]) -> float:
    """Share of the tree's variables named (``all``; RULER's score, 0 if any other is named),
    or the score (``leaf``)."""
    if record["meta"]["question"] != "all":
        return tree_score(prediction, record)
    gold = set(record["meta"]["variables"])
    named = set(re.findall(r"\b[A-Z]{5}\b", prediction or ""))
    return 0.0 if named - gold else len(named & gold) / len(gold)


__all__ = [
    "NAMES",
    "OBJECTS",
    "QUESTION",
    "TREE_QUESTION",
    "TREE_QUESTIONS",
    "assignments_in",
    "chain_names",
    "chunk_tokens_for",
    "facts_in",
    "generate",
    "generate_tree",
    "holders",
    "keep_facts",
    "keep_tree_facts",
    "memory_cap_reader",
    "resolve",
    "score",
    "tree_answer",
    "tree_reader",
    "tree_recall",
    "tree_score",
    "tree_support",
    "value_of",
]
