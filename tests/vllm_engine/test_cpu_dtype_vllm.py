"""vllm:default with no dtype and no CHUNKWISE_CPU_DTYPE runs in the CPU's automatic dtype.

The engine runs in a child process: an engine started in the test process keeps its memory
after close, and beside the session's engine, the server and the dp=2 replicas that exceeded
a 24 GiB machine (an OOM kill in CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chunkwise.llm import cpu

CHILD = r"""
import json
from chunkwise.benchmarks.infinitebench.metrics import score_one
from chunkwise.data.synthetic import generate, passkey_query
from chunkwise.llm import load_llm
from chunkwise.strategies import get_strategy


def engine_dtype(engine):
    for path in (("llm_engine", "model_config"), ("model_config",)):
        obj = engine
        for attr in path:
            obj = getattr(obj, attr, None)
        if obj is not None and getattr(obj, "dtype", None) is not None:
            return str(obj.dtype)
    return None


with load_llm("vllm:default?max_model_len=2048&inproc=1") as llm:
    # the first 3 of bench/cpu_dtype.py's documents, right in fp32 and bf16 on hf
    docs = generate("passkey", length_tokens=600, n=6, seed=11, count_tokens=llm.count_tokens)
    answers = []
    for rec in docs[:3]:
        ans = get_strategy("standard").answer(rec["context"], passkey_query(rec), llm)
        answers.append([rec["answer"], ans.text, score_one("passkey", ans.text, rec["answer"])])
    print("RESULT " + json.dumps({"dtype": engine_dtype(llm.engine), "answers": answers}))
"""


@pytest.mark.slow
def test_vllm_default_runs_in_the_automatic_dtype_and_answers() -> None:
    env = {k: v for k, v in os.environ.items() if k != cpu.CPU_DTYPE_ENV}  # the suite's pin, lifted
    run = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=900
    )
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(x for x in run.stdout.splitlines() if x.startswith("RESULT "))
    got = json.loads(line[len("RESULT ") :])
    flags = cpu.cpu_flags(Path("/proc/cpuinfo").read_text(encoding="utf-8"))
    want = "torch.bfloat16" if flags & {"amx_bf16", "avx512_bf16"} else "torch.float32"
    assert got["dtype"] == want
    for answer, text, score in got["answers"]:
        assert score == 1.0, (answer, text)
