"""vllm:default with no dtype and no CHUNKWISE_CPU_DTYPE runs in the CPU's automatic dtype."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunkwise.llm import cpu


def _engine_dtype(engine):
    for path in (("llm_engine", "model_config"), ("model_config",)):
        obj = engine
        for attr in path:
            obj = getattr(obj, attr, None)
        if obj is not None and getattr(obj, "dtype", None) is not None:
            return obj.dtype
    pytest.fail("cannot read the dtype from the vLLM engine")


@pytest.mark.slow
def test_vllm_default_runs_in_the_automatic_dtype_and_answers(monkeypatch) -> None:
    import torch

    from chunkwise.benchmarks.infinitebench.metrics import score_one
    from chunkwise.data.synthetic import generate, passkey_query
    from chunkwise.llm import load_llm
    from chunkwise.strategies import get_strategy

    monkeypatch.delenv(cpu.CPU_DTYPE_ENV)  # the suite's fp32 pin, lifted for this test
    flags = cpu.cpu_flags(Path("/proc/cpuinfo").read_text(encoding="utf-8"))
    want = torch.bfloat16 if flags & {"amx_bf16", "avx512_bf16"} else torch.float32
    with load_llm("vllm:default?max_model_len=2048&inproc=1") as llm:
        assert _engine_dtype(llm.engine) == want
        # the first 3 of bench/cpu_dtype.py's documents, right in fp32 and bf16 on hf
        docs = generate("passkey", length_tokens=600, n=6, seed=11, count_tokens=llm.count_tokens)
        for rec in docs[:3]:
            ans = get_strategy("standard").answer(rec["context"], passkey_query(rec), llm)
            assert score_one("passkey", ans.text, rec["answer"]) == 1.0, (rec["answer"], ans.text)
