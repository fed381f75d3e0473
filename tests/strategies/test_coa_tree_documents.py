"""Tree-structured multi-hop documents (multihop.generate_tree) and their capped scripted
reader (bench/orderings.py's tests are in tests/bench/test_orderings.py)."""

from __future__ import annotations

import itertools
import re

import pytest

from chunkwise.data import multihop as mh
from chunkwise.errors import BadInput
from chunkwise.strategies import Query, get_strategy
from chunkwise.text import WordPieceCounter, chunk_document


def trees(question="all", n=20, **kw):
    kw.setdefault("branches", 3)
    kw.setdefault("depth", 2)
    return mh.generate_tree(n=n, seed=kw.pop("seed", 5), question=question, **kw)


def _facts(r, drop=()):
    return [
        f
        for i, s in enumerate(r["meta"]["sections"])
        if i not in drop
        for f in mh.assignments_in(s)
    ]


def _names(answer):
    return set((answer or "").split(", ")) - {""}


# -- the generator ---------------------------------------------------------------------------


def test_deterministic_well_formed_one_fact_per_section():
    a = trees()
    assert a == trees() and a != trees(seed=6)
    for r in a:
        m = r["meta"]
        assert len(m["sections"]) == 2 * (1 + 3 * 2) + 2
        assert r["context"] == "\n\n".join(m["sections"])
        for i, s in enumerate(m["sections"]):
            found = mh.assignments_in(s)
            assert found == ([m["facts"][str(i)]] if str(i) in m["facts"] else [])
            rest = s.replace(found[0], "") if found else s
            assert not re.search(r"\d|VAR|[A-Z]{5}", rest)  # filler names nothing


@pytest.mark.parametrize("question", ["all", "leaf"])
def test_the_answer_tree_is_a_tree_with_branches_not_a_chain(question):
    for r in trees(question):
        m = r["meta"]
        tree = {int(k): v for k, v in m["tree"].items()}
        roots = [c for c, p in tree.items() if p is None]
        assert roots == [m["root"]]
        assert len(tree) == 1 + 3 * 2  # n nodes, n - 1 edges: a tree ...
        for c in tree:  # ... every node reaches the root without a cycle
            seen = [c]
            while tree[seen[-1]] is not None:
                seen.append(tree[seen[-1]])
                assert len(seen) <= len(tree)
            assert seen[-1] == m["root"]
        children = [p for p in tree.values() if p is not None]
        assert children.count(m["root"]) == 3  # the root branches: not a chain
        for c, p in tree.items():  # each fact copies from its parent's variable
            if p is not None:
                parent_var = re.match(r"VAR ([A-Z]{5})", m["facts"][str(p)]).group(1)
                assert m["facts"][str(c)].endswith(f"= VAR {parent_var}.")
        assert str(m["value"]) in m["facts"][str(m["root"])]


def test_all_needs_the_root_and_every_branch():
    for r in trees("all"):
        m = r["meta"]
        assert _names(mh.tree_answer(_facts(r), r["input"])) == _names(r["answer"])
        assert _names(r["answer"]) == set(m["variables"])
        assert sorted(m["evidence"]) == sorted(int(k) for k in m["tree"])
        tree = {int(k): v for k, v in m["tree"].items()}
        assert len({c for c in m["evidence"] if tree[c] == m["root"]}) >= 2  # >= 2 branches
        for drop in m["evidence"]:  # any evidence fact missing: the answer is wrong
            assert _names(mh.tree_answer(_facts(r, [drop]), r["input"])) != _names(r["answer"])
        others = [int(k) for k in m["facts"] if int(k) not in m["evidence"]]
        for drop in others:  # the distractor trees do not matter
            assert _names(mh.tree_answer(_facts(r, [drop]), r["input"])) == _names(r["answer"])
        assert mh.tree_score(r["answer"], r) == 1.0
        assert mh.tree_score(", ".join(m["variables"][:-1]), r) == 0.0
        assert mh.tree_recall(", ".join(m["variables"][:-1]), r) == pytest.approx(6 / 7)


def test_leaf_needs_the_root_and_its_branch_only():
    for r in trees("leaf"):
        m = r["meta"]
        tree = {int(k): v for k, v in m["tree"].items()}
        ev = m["evidence"]
        assert ev[0] == m["root"] and len(ev) == 1 + 2  # root + one branch of depth 2
        assert all(tree[b] == a for a, b in itertools.pairwise(ev))
        assert m["leaf"] in m["facts"][str(ev[-1])] and m["leaf"] in r["input"]
        assert mh.tree_answer(_facts(r), r["input"]) == r["answer"] == str(m["value"])
        for drop in ev:
            assert mh.tree_answer(_facts(r, [drop]), r["input"]) is None
        for drop in (c for c in tree if c not in ev):  # the other branches do not matter
            assert mh.tree_answer(_facts(r, [drop]), r["input"]) == r["answer"]
        assert mh.tree_score(f"It is {r['answer']}.", r) == 1.0
        assert mh.tree_score(str(m["distractor_values"][0]), r) == 0.0


def test_bad_shapes_are_refused():
    with pytest.raises(BadInput, match="branches"):
        mh.generate_tree(n=1, branches=1)
    with pytest.raises(BadInput, match="question"):
        mh.generate_tree(n=1, question="some")


def test_one_section_per_chunk():
    counter = WordPieceCounter()
    recs = trees(n=10)
    size = mh.chunk_tokens_for(recs, counter.count_tokens)  # one size for all, as the bench
    for r in recs:
        chunks = chunk_document(r["context"], counter, size)
        assert [c.text.strip() for c in chunks] == r["meta"]["sections"]


# -- the scripted capped reader: the order decides under a binding cap ----------------------


def _run_in_order(r, order, cap):
    """The chain reading ``r``'s sections in ``order`` (a document rebuilt in that order)."""
    reader = mh.tree_reader(cap)
    secs = [r["meta"]["sections"][i] for i in order]
    doc = "\n\n".join(secs)
    s = get_strategy(
        "chain_of_agents",
        memory_tokens=cap,
        prompts="chat",
        chunk_tokens=max(reader.count_tokens(x) for x in secs),
    )
    return s.answer(doc, Query(r["input"]), reader)


def test_parents_first_keeps_the_tree_children_first_loses_it():
    r = trees("all", n=1)[0]
    m = r["meta"]
    reader = mh.tree_reader(1)
    cap = reader.count_tokens(" ".join(m["facts"][str(p)] for p in m["evidence"]))
    assert cap < reader.count_tokens(" ".join(m["facts"].values()))  # the cap binds
    rest = [i for i in range(len(m["sections"])) if i not in m["evidence"]]
    bfs = m["evidence"] + rest  # the tree breadth first from its root, then the rest
    assert mh.tree_score(_run_in_order(r, bfs, cap).text, r) == 1.0
    # every child before its parent, the other tree in between: the newer facts push the
    # children out before the root shows they mattered
    leaves_first = m["evidence"][:0:-1] + rest + [m["root"]]
    ans = _run_in_order(r, leaves_first, cap)
    assert mh.tree_score(ans.text, r) == 0.0
    assert 0 < mh.tree_recall(ans.text, r) < 1
