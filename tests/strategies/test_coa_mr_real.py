"""Chain-of-Agents rewrite workers on the real hf:default-mr (the ``mr`` prompt set)."""

from __future__ import annotations

import pytest

from chunkwise.strategies import Query, get_strategy

FACT = "VAR QKZTB = 48213."
FILLER = "The miller watched the harbour wall in early spring. The baker swept the orchard at dawn."


@pytest.fixture(scope="module")
def mr_llm():
    from chunkwise.llm import default_mr, load_llm

    if not (default_mr.package_dir() / "adapter_model.safetensors").is_file():
        pytest.skip("no hf:default-mr adapter committed yet: run `make default-mr`")
    llm = load_llm("hf:default-mr")
    yield llm
    llm.close()


@pytest.mark.slow
def test_rewrite_workers_carry_the_first_fact_past_a_chunk_without_one(mr_llm):
    """The fact is read first; the second worker reads it as memory next to a chunk that has
    no fact and must write it again (measured: it copies it). What the adapter does
    not do is add a later chunk's fact to a memory that already holds one (bench/orderings.py's
    docstring), so that is not asserted here."""
    doc = f"The ferryman described the cliff path at dawn. {FACT}\n\n{FILLER}"
    s = get_strategy("chain_of_agents", memory_tokens=24, chunk_tokens=24)
    ans = s.answer(doc, Query("Which value is VAR QKZTB assigned?"), mr_llm)
    assert ans.stats.extra["prompt_kind"] == "mr"  # auto picked the MapReduce-phrased set
    workers = [e for e in ans.trace if e.stage == "worker"]
    assert len(workers) == 2
    for w in workers:
        assert w.output["raw"].startswith("Extracted Information:")  # the protocol, as trained
        assert not w.output["memory"].startswith("Extracted Information")  # label removed
        assert w.output["memory_tokens"] <= 24
    memories = [w.output["memory"] for w in workers]
    # the fact's variable and value, in the adapter's words (measured: "VAR QKZTB assigns
    # 48213." for the first worker)
    assert all("QKZTB" in m and "48213" in m for m in memories), memories
    assert not workers[1].output["kept_previous"]  # carried forward by a rewrite, not kept
