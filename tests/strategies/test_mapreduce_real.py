"""MapReduce on real models: the embedded Gemma, directly and through an OpenAI server."""

from __future__ import annotations

import pytest

from chunkwise.data.synthetic import generate, passkey_query
from chunkwise.eval.metrics import score_one
from chunkwise.llm import load_llm
from chunkwise.strategies import get_strategy
from chunkwise.strategies.mapreduce import to_intermediate


@pytest.fixture(scope="module")
def passkey_8k(embedded_llm):
    return generate(
        "passkey", length_tokens=8000, n=1, seed=3, count_tokens=embedded_llm.count_tokens
    )[0]


@pytest.mark.slow
def test_embedded_model_finds_passkey_in_8k_document(embedded_llm, passkey_8k):
    ans = get_strategy("mapreduce", window=4096).answer(
        passkey_8k["context"], passkey_query(passkey_8k), embedded_llm
    )
    assert score_one("passkey", ans.text, passkey_8k["answer"]) == 1.0, ans.text
    m = to_intermediate(ans)
    assert len(m["map"]) == ans.stats.extra["chunks"] >= 8
    kept = [r for r in m["map"] if (r["confidence"] or 0) >= 3.5]
    assert any(passkey_8k["answer"][0] in (r["answer"] or "") for r in kept)


@pytest.mark.slow
def test_openai_backend_drives_a_full_mapreduce_run(embedded_llm, passkey_8k):
    from chunkwise.serve import serve_in_thread

    with serve_in_thread(embedded_llm) as base_url:
        remote = load_llm(f"openai:default@{base_url}?tokenizer=hf:default&ctx=32768")
        try:
            ans = get_strategy("mapreduce", window=4096).answer(
                passkey_8k["context"], passkey_query(passkey_8k), remote
            )
        finally:
            remote.close()
    assert score_one("passkey", ans.text, passkey_8k["answer"]) == 1.0, ans.text
    assert ans.stats.llm_calls >= ans.stats.extra["chunks"] + 1
    assert ans.stats.extra["confidence_source"] == "logprob"
