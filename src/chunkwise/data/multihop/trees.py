"""Tree documents: one root variable holds a value and ``branches`` chains of ``depth``
variables each copy it (RULER's variable tracking, shaped as a tree), among distractor trees;
and the rules that answer a tree question from a set of assignments."""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from chunkwise.data.multihop.sections import section
from chunkwise.errors import BadInput

TREE_ROOT = "VAR {name} = {value}."
TREE_LINK = "VAR {name} = VAR {parent}."
TREE_QUESTIONS = {
    "all": "Which variables are assigned the value {value}?",
    "leaf": "Which value is VAR {name} assigned?",
}
#: an assignment sentence: a root (name, value) or a copy (name, parent)
ASSIGNMENT = re.compile(r"VAR (?P<name>[A-Z]{5}) = (?:VAR (?P<parent>[A-Z]{5})|(?P<value>\d{5}))\.")
TREE_QUESTION = re.compile(
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
        sections = [section(rng, slot.get(p), section_sentences) for p in range(n_sections)]
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
    return [m.group(0) for m in ASSIGNMENT.finditer(text)]


def _assign_links(facts: Sequence[str]) -> tuple[dict[str, str], dict[str, str]]:
    values, parents = {}, {}
    for f in facts:
        m = ASSIGNMENT.fullmatch(f)
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


def path_up(facts: Sequence[str], name: str) -> list[str]:
    """``name`` and the variables it copies from, as far as ``facts`` go."""
    _, parents = _assign_links(facts)
    out = [name]
    while out[-1] in parents and parents[out[-1]] not in out:
        out.append(parents[out[-1]])
    return out


def tree_target(question: str) -> tuple[str | None, str | None]:
    m = TREE_QUESTION.search(question or "")
    if m is None:
        return None, None
    return m.group("value"), m.group("name")


def tree_answer(facts: Sequence[str], question: str) -> str | None:
    """What ``facts`` answer to a tree question: the holders of the value (comma-joined) or
    the leaf's value; None when they do not answer it."""
    value, name = tree_target(question)
    if value is not None:
        held = holders(facts, value)
        return ", ".join(held) if held else None
    if name is not None:
        return value_of(facts, name)
    return None


def tree_support(facts: Sequence[str], question: str) -> list[str]:
    """The assignments of ``facts`` an answer to a tree question follows, in read order: the
    value's holders' for ``all``, the asked variable's path upwards for ``leaf``."""
    value, name = tree_target(question)
    on = set(holders(facts, value)) if value is not None else set(path_up(facts, name or ""))
    return [
        f for f in facts if (m := ASSIGNMENT.fullmatch(f)) is not None and m.group("name") in on
    ]


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
