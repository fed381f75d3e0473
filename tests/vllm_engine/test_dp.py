"""``vllm:default?dp=2`` on CPU: two engine replicas, each a process pinned to its own cores,
give the greedy outputs of the one session engine (``dp=1``).

``make test`` runs this file in its own pytest process: its two replicas beside the session's
engine and the ``vllm serve`` of the other files need more memory than a 24 GiB machine has."""

from __future__ import annotations

import os

import pytest

from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.llm.parity import PARITY_PROMPTS

pytestmark = pytest.mark.slow


def test_dp2_matches_dp1_and_pins_each_replica(vllm_llm, record_property) -> None:
    # longer and shorter prompts, so the split by prompt tokens gives both replicas work
    prompts = [*PARITY_PROMPTS[:6], " ".join(PARITY_PROMPTS) * 3]
    reqs = [Request(p, GenerationParams(max_new_tokens=10)) for p in prompts]
    one = [o.text for o in vllm_llm.generate(reqs)]
    dp = load_llm("vllm:default?max_model_len=8192&dtype=float32&dp=2")  # conftest's, dp=2
    try:
        pool = dp.engine
        two = dp.generate(reqs)
        cores = sorted(os.sched_getaffinity(0))
        pinned = [r["cpus"] for r in pool.replicas]
    finally:
        dp.close()
    assert len(pinned) == 2 and not pool._procs  # both replicas ran, and close ended them
    if len(cores) >= 2:  # each replica on its own half of the cores
        half = len(cores) // 2
        assert pinned == [cores[:half], cores[half : 2 * half]]
    same = sum(a == b.text for a, b in zip(one, two, strict=True))
    record_property("dp2_vs_dp1", f"{same}/{len(reqs)}")
    assert [o.text for o in two] == one
    assert [o.prompt_tokens for o in two] == [len(dp.tokenizer(p)["input_ids"]) for p in prompts]
