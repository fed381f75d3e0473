"""The Chain-of-Agents oracle (`make default-coa`'s data): its worker rewrites the memory as
the capped tree reader would, its manager follows the memory's assignments, and what it
writes are chat records of the exact calls chain_of_agents makes."""

from __future__ import annotations

import json

import pytest

from chunkwise.data import multihop as mh
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.strategies import Query, get_strategy
from chunkwise.strategies.protocol import NO_INFO
from chunkwise.synth import coa_oracle as co

LEAF_Q = "Which value is VAR LEAFA assigned?"
ALL_Q = "Which variables are assigned the value 12345?"


def counter() -> ScriptedLLM:
    llm = ScriptedLLM(window=8192)
    llm.chat = True
    return llm


def words(text: str) -> int:
    return len(text.split())


def test_the_worker_keeps_the_questions_path_first_and_drops_the_oldest_unrelated_fact():
    part = (
        "VAR OTHER = VAR ZZZZZ. VAR MIDDL = VAR ROOTA.\n\n"
        "Filler text here. VAR LEAFA = VAR MIDDL. VAR NEWER = 55555."
    )
    # 5 words a copy, 4 a value: a cap of 14 holds the path and the newest other fact
    got = co.worker_target(part, LEAF_Q, 14, words, "Extracted Information:", "nothing")
    assert got == (
        "Extracted Information: VAR MIDDL = VAR ROOTA. VAR LEAFA = VAR MIDDL. VAR NEWER = 55555."
    )
    roomy = co.worker_target(part, LEAF_Q, 100, words, "Extracted Information:", "nothing")
    assert "VAR OTHER = VAR ZZZZZ." in roomy
    assert co.worker_target("No facts.", LEAF_Q, 12, words, "L:", "nothing") == "L: nothing"


def test_the_manager_follows_the_chain_or_says_no_information():
    mem = "VAR ROOTA = 12345. VAR XXXXX = VAR YYYYY. VAR MIDDL = VAR ROOTA. VAR LEAFA = VAR MIDDL."
    leaf = co.manager_target(mem, LEAF_Q)
    assert leaf.endswith("\nAnswer: 12345")
    assert "XXXXX" not in leaf  # only the assignments on the path are the rationale
    assert co.manager_target(mem, ALL_Q).endswith("Answer: ROOTA, MIDDL, LEAFA")
    broken = co.manager_target("VAR LEAFA = VAR MIDDL.", LEAF_Q)
    assert broken.endswith(f"Answer: {NO_INFO}")


def test_the_oracle_answers_what_the_capped_reader_would():
    """Through the real strategy, the oracle's answers equal the scripted tree reader's (the
    bench's control arm) on the same documents, ordering and cap."""
    llm = counter()
    records = mh.generate_tree(n=6, seed=3, question="leaf")
    cap = co.cap_tokens(records, 1.0, llm.count_tokens)
    chunk = mh.chunk_tokens_for(records, llm.count_tokens)
    items = [(r["context"], Query(r["input"])) for r in records]
    mr = get_strategy("chain_of_agents", memory_tokens=cap, chunk_tokens=chunk, prompts="mr")
    oracle = co.CoAOracleLLM(llm, cap)
    answers = mr.answer_many(items, oracle)
    got = [mh.tree_score(a.text, r) for a, r in zip(answers, records, strict=True)]
    reader = mh.tree_reader(cap)
    chat = get_strategy("chain_of_agents", memory_tokens=cap, chunk_tokens=chunk, prompts="chat")
    answers = chat.answer_many(items, reader)
    want = [mh.tree_score(a.text, r) for a, r in zip(answers, records, strict=True)]
    assert got == want
    assert 0 < sum(got) < len(got)  # the cap binds: some documents are lost, not all
    roles = [c["role"] for c in oracle.calls]
    assert roles.count("manager") == len(records)
    assert roles.count("worker") == sum(len(r["meta"]["sections"]) for r in records)


def test_synthesize_writes_the_exact_calls_as_chat_records(tmp_path, monkeypatch):
    out = tmp_path / "coa.jsonl"
    stats = co.synthesize(
        out, groups=1, group_size=2, counter=counter(), embedder="hashing",
        methods=("default", "dfs"), progress=False,
    )  # fmt: skip
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == stats["records"] == stats["worker"] + stats["manager"]
    assert stats["manager"] == 2 * 2 * 2  # questions x orderings x documents
    assert len({r["id"] for r in rows}) == len(rows)
    assert len({r["messages"][0]["content"] for r in rows}) == len(rows)  # no repeated call
    for r in rows:
        user, reply = r["messages"]
        assert user["role"] == "user" and reply["role"] == "assistant"
        if r["meta"]["role"] == "worker":
            assert reply["content"].startswith("Extracted Information: ")
            assert words(reply["content"]) <= r["meta"]["cap_tokens"] + 8
        else:
            assert reply["content"].startswith("Rationale: ")
        assert r["meta"]["seed"] >= co.TRAIN_SEED  # bench/orderings.py reads seeds 0..n
    with pytest.raises(co.BadInput):
        co.synthesize(out, groups=0, counter=counter(), embedder="hashing", progress=False)
    with pytest.raises(co.BadInput, match="--out"):
        co.synthesize(tmp_path, groups=1, counter=counter(), embedder="hashing", progress=False)
