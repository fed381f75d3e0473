"""Chain-of-Agents on the embedded model (hf:default): a short smoke run."""

from __future__ import annotations

import pytest

from chunkwise.data import multihop as mh
from chunkwise.data.synthetic import generate, passkey_query
from chunkwise.strategies import get_strategy


@pytest.mark.slow
def test_embedded_model_runs_a_capped_chain_over_a_short_passkey_document(embedded_llm):
    rec = generate(
        "passkey", length_tokens=500, n=3, seed=5, count_tokens=embedded_llm.count_tokens
    )[0]
    cap = 16
    s = get_strategy(
        "chain_of_agents", memory_tokens=cap, chunk_tokens=200, ordering="dense", embedder="hashing"
    )
    ans = s.answer(rec["context"], passkey_query(rec), embedded_llm)
    workers = [e for e in ans.trace if e.stage == "worker"]
    assert len(workers) == ans.stats.extra["chunks"] >= 3
    assert ans.stats.llm_calls == len(workers) + 1
    assert ans.trace[-1].stage == "manager"
    for e in workers:
        assert e.output["memory_tokens"] <= cap
        assert embedded_llm.count_tokens(e.output["memory"]) <= cap
    # the needle's chunk is read first (dense order), so the notes start from it
    assert ans.stats.extra["root"] == ans.stats.extra["order"][0]
    assert isinstance(ans.text, str)


@pytest.mark.slow
def test_embedded_model_on_two_multihop_documents_in_one_batch(embedded_llm):
    recs = mh.generate(n=2, seed=1, hops=2, distractor_chains=0, filler_sections=1)
    s = get_strategy(
        "chain_of_agents",
        memory_tokens=16,
        ordering="chowliu",
        embedder="hashing",
        chunk_tokens=mh.chunk_tokens_for(recs, embedded_llm.count_tokens),
    )
    from chunkwise.strategies import Query

    answers = s.answer_many([(r["context"], Query(r["input"])) for r in recs], embedded_llm)
    for a, r in zip(answers, recs, strict=True):
        assert a.stats.extra["chunks"] == len(r["meta"]["sections"])
        assert all(e.output["memory_tokens"] <= 16 for e in a.trace if e.stage == "worker")
