"""Chain-of-Agents rewrite workers on the real hf:default-mr (the ``mr`` prompt set)."""

from __future__ import annotations

import pytest

from chunkwise.strategies import Query, get_strategy
from chunkwise.text import chunk_document

# a finding of a family hf:default-mr was taught (passkey)
FACT = "The pass key is 48213. Remember it. 48213 is the pass key."
FILLER = "The miller watched the harbour wall in early spring. The baker swept the orchard at dawn."


@pytest.fixture
def mr_llm(default_mr_llm):
    return default_mr_llm


@pytest.mark.slow
def test_rewrite_workers_follow_the_protocol_and_keep_a_fact_of_a_taught_kind(mr_llm):
    """Each worker is a map call in the trained protocol (its label removed, its memory within
    the cap), and the worker that reads the fact writes it into the memory. Whether the next
    worker carries it past a chunk without one is not asserted: default-mr was never trained
    on Chain-of-Agents calls, and that changed between adapters (the eighth copied the fact,
    the ninth writes the filler chunk's first sentence); hf:default-coa is taught it
    (tests/strategies/test_coa_trained_real.py)."""
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
    # the fact, in the adapter's words (measured: "The pass key is 48213. Remember it. 48213
    # is the pass key")
    first = workers[0].output["memory"]
    assert "pass key" in first and "48213" in first, first
