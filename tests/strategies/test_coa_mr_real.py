"""Chain-of-Agents rewrite workers on the real hf:default-mr (the ``mr`` prompt set)."""

from __future__ import annotations

import pytest

from chunkwise.strategies import Query, get_strategy
from chunkwise.text import chunk_document

# a finding of a family hf:default-mr was taught (passkey); a variable assignment, the held-out
# family's kind of fact, it calls empty (measured on the shipped adapter: both memories "")
FACT = "The pass key is 48213. Remember it. 48213 is the pass key."
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
    s = get_strategy("chain_of_agents", memory_tokens=24, chunk_tokens=36)
    ans = s.answer(doc, Query("What is the pass key?"), mr_llm)
    assert ans.stats.extra["prompt_kind"] == "mr"  # auto picked the MapReduce-phrased set
    workers = [e for e in ans.trace if e.stage == "worker"]
    assert len(workers) == 2
    chunks = [c.text for c in chunk_document(doc, mr_llm, 36)]
    assert len(chunks) == 2 and FACT in chunks[0] and "48213" not in chunks[1]
    for w in workers:
        assert w.output["raw"].startswith("Extracted Information:")  # the protocol, as trained
        assert not w.output["memory"].startswith("Extracted Information")  # label removed
        assert w.output["memory_tokens"] <= 24
    memories = [w.output["memory"] for w in workers]
    # the fact, in the adapter's words (measured: "The pass key is 48213. Remember it. 48213
    # is the pass key" for both workers)
    assert all("pass key" in m and "48213" in m for m in memories), memories
    assert not workers[1].output["kept_previous"]  # carried forward by a rewrite, not kept
