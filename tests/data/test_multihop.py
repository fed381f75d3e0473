"""The synthetic multi-hop ordering task and its memory-capped scripted reader."""

from __future__ import annotations

import re

import pytest

from chunkwise.data import multihop as mh
from chunkwise.errors import BadInput
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.strategies import Query, get_strategy
from chunkwise.text import WordPieceCounter, chunk_document


def records(n=20, **kw):
    kw.setdefault("hops", 3)
    kw.setdefault("distractor_chains", 2)
    kw.setdefault("filler_sections", 2)
    return mh.generate(n=n, seed=kw.pop("seed", 7), **kw)


def test_deterministic_and_well_formed():
    a, b = records(), records()
    assert a == b
    assert records(seed=8) != a
    assert len({r["id"] for r in a}) == len(a)
    for r in a:
        assert set(r) == {"id", "context", "input", "answer", "options", "meta"}
        m = r["meta"]
        assert len(m["sections"]) == 3 * 3 + 2
        assert r["context"] == "\n\n".join(m["sections"])
        assert re.fullmatch(r"What is the [a-z]+ code\?", r["input"])
        assert len(m["chain"]) == m["hops"] == 3


def test_each_section_has_at_most_one_fact_and_filler_has_no_digits_or_names():
    for r in records():
        facts = r["meta"]["facts"]
        for i, s in enumerate(r["meta"]["sections"]):
            found = mh.facts_in(s)
            assert found == ([facts[str(i)]] if str(i) in facts else [])
            rest = s
            for f in found:
                rest = rest.replace(f, "")
            assert not re.search(r"\d", rest)
            assert not any(name in rest for name in mh.NAMES)


def test_the_answer_needs_the_whole_chain():
    for r in records():
        obj = re.search(r"the ([a-z]+) code", r["input"]).group(1)
        secs = r["meta"]["sections"]
        chain = r["meta"]["chain"]
        every = [f for s in secs for f in mh.facts_in(s)]
        assert mh.resolve(every, obj) == r["answer"]
        head, tail = secs[chain[0]], secs[chain[-1]]
        assert obj in head and r["answer"] in tail
        assert obj not in tail and r["answer"] not in head
        for drop in chain:  # leave any one chain fact out: unresolvable
            partial = [f for i, s in enumerate(secs) if i != drop for f in mh.facts_in(s)]
            assert mh.resolve(partial, obj) is None
        # the answer is only in the tail; distractor codes are elsewhere
        assert sum(r["answer"] in s for s in secs) == 1
        assert all(d != r["answer"] and d in r["context"] for d in r["meta"]["distractor_answers"])


def test_chain_facts_are_spread_apart():
    for r in records(n=40, hops=2):
        a, b = sorted(r["meta"]["chain"])
        assert b - a >= 2


def test_chain_order_in_the_document_varies():
    firsts = {r["meta"]["chain"][0] < r["meta"]["chain"][-1] for r in records(n=40)}
    assert firsts == {True, False}


def test_one_section_per_chunk():
    count = WordPieceCounter().count_tokens
    for r in records(n=10, section_sentences=3):
        n = mh.chunk_tokens_for(r, count)
        chunks = chunk_document(r["context"], WordPieceCounter(), n)
        assert [c.text for c in chunks] == r["meta"]["sections"]


def test_sections_are_of_similar_length():
    count = ScriptedLLM().count_tokens
    for k in (2, 4):
        recs = records(n=30, section_sentences=k)
        sizes = [count(s) for r in recs for s in r["meta"]["sections"]]
        assert 2 * min(sizes) > max(sizes)
        assert mh.chunk_tokens_for(recs, count) == max(sizes)


def test_bad_arguments():
    with pytest.raises(BadInput):
        mh.generate(n=0)
    with pytest.raises(BadInput, match="hops"):
        mh.generate(n=1, hops=1)
    with pytest.raises(BadInput, match="section_sentences"):
        mh.generate(n=1, section_sentences=1)
    with pytest.raises(BadInput, match="more objects or names"):
        mh.generate(n=1, hops=10, distractor_chains=10)


# --------------------------------------------------------------------------------------------
# the memory-capped reader


def test_keep_facts_stays_under_the_cap_and_prefers_the_chain():
    count = ScriptedLLM().count_tokens
    head = mh.HEAD.format(obj="vault", name="Odile")
    tail = mh.TAIL.format(name="Odile", code="4817")
    other1 = mh.TAIL.format(name="Bruno", code="1111")
    other2 = mh.HEAD.format(obj="attic", name="Bruno")
    # tail first, unknown relevance: kept while there is room, newest others first
    cap = count(" ".join([head, tail]))  # two facts
    kept = mh.keep_facts([], [tail], "vault", cap, count)
    assert kept == [tail]
    kept = mh.keep_facts(kept, [other1], "vault", cap, count)
    assert kept == [tail, other1]
    kept = mh.keep_facts(kept, [other2], "vault", cap, count)
    assert tail not in kept  # pushed out before its head arrived
    # head first: the tail is recognised when it comes, and kept over newer others
    kept = mh.keep_facts([], [head], "vault", cap, count)
    kept = mh.keep_facts(kept, [tail], "vault", cap, count)
    kept = mh.keep_facts(kept, [other1], "vault", cap, count)
    assert kept == [head, tail]
    for k in range(0, 40, 3):
        assert (
            count(" ".join(mh.keep_facts([head, tail], [other1, other2], "vault", k, count))) <= k
        )


def _accuracy(recs, cap, ordering="default"):
    llm = mh.memory_cap_reader(cap)
    s = get_strategy(
        "chain_of_agents",
        memory_tokens=cap,
        ordering=ordering,
        embedder="hashing",
        chunk_tokens=mh.chunk_tokens_for(recs, llm.count_tokens),
    )
    answers = s.answer_many([(r["context"], Query(r["input"])) for r in recs], llm)
    for a in answers:
        assert a.stats.extra["chunks"] == len(recs[0]["meta"]["sections"])
        assert all(e.output["memory_tokens"] <= cap for e in a.trace if e.stage == "worker")
    return sum(mh.score(a.text, r["answer"]) for a, r in zip(answers, recs, strict=True)) / len(
        recs
    )


def test_reader_through_the_strategy_loses_facts_only_under_a_tight_cap():
    recs = records(n=30, hops=3, distractor_chains=2)
    assert _accuracy(recs, cap=400) == 1.0  # room for every fact: order cannot matter
    tight = _accuracy(recs, cap=36)  # the chain (three facts) just fits
    assert tight < 0.8


def test_reader_in_chain_order_keeps_the_chain():
    """Sections laid out head -> middle -> tail with distractors between: document order is
    the right order, and the capped reader answers; reversed, it cannot."""
    r = records(n=1, hops=3, distractor_chains=2)[0]
    secs = r["meta"]["sections"]
    chain = r["meta"]["chain"]
    others = [s for i, s in enumerate(secs) if i not in chain]
    forward = [
        secs[chain[0]],
        *others[:2],
        secs[chain[1]],
        *others[2:4],
        secs[chain[2]],
        *others[4:],
    ]
    backward = [
        secs[chain[2]],
        *others[:3],
        secs[chain[1]],
        *others[3:6],
        secs[chain[0]],
        *others[6:],
    ]
    for layout, expected in ((forward, 1.0), (backward, 0.0)):
        rec = dict(r, context="\n\n".join(layout), meta=dict(r["meta"], sections=layout))
        assert _accuracy([rec], cap=36) == expected
