"""Data parallelism on the real vLLM engine on CPU, against the greedy outputs of one engine
(``dp=1``):

- ``vllm:default?dp=2``: two engine replicas, each a process pinned to its own cores;
- the recipe past one node: ``openai:`` against vLLM's OpenAI server started with
  ``--data-parallel-size 2`` (one endpoint, two engines), both engines serving.

``make test`` runs this file in its own pytest process: its engines beside the session's
engine and the ``vllm serve`` of the other files need more memory than a 24 GiB machine has.
Here one set of engines runs at a time: the ``dp=1`` reference is closed before the replicas
start, and they before the server does."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest
from tests.vllm_engine.conftest import (
    CHAT_TEMPLATE,
    SERVED_NAME,
    VLLM_SPEC,
    _free_port,
    serve_command,
    stop_group,
    wait_healthy,
)

from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.llm.parity import PARITY_PROMPTS

pytestmark = pytest.mark.slow

#: short prompts and one long one, so that a split by prompt tokens gives both replicas work;
#: ten of them, all in flight at once through openai: (concurrency 16)
PROMPTS = [*PARITY_PROMPTS[:9], " ".join(PARITY_PROMPTS) * 3]
REQS = [Request(p, GenerationParams(max_new_tokens=10)) for p in PROMPTS]
#: the server's engines: 2 GiB of KV cache between them, and contexts of 2,048 tokens
SERVER_KV_GB = "1"
SERVER_MAX_MODEL_LEN = 2048


@pytest.fixture(scope="module")
def dp1() -> list:
    """The completions of one engine (``vllm:default``, conftest's settings), closed before
    the data-parallel engines start."""
    with load_llm(VLLM_SPEC) as llm:
        out = llm.generate(REQS)
    left = running_children()
    assert not [c for c in left if "EngineCore" in c], left  # close ended its engine process
    return out


def running_children() -> list[str]:
    """The command lines of this process's descendants that still run. A process that has
    ended but is not reaped yet (a zombie: it holds no memory) is not running, nor is one that
    ends while it is listed."""
    import psutil

    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if p.status() != psutil.STATUS_ZOMBIE:
                out.append(" ".join(p.cmdline()))
        except psutil.Error:
            continue
    return out


def test_dp2_matches_dp1_and_pins_each_replica(dp1, record_property) -> None:
    one = [o.text for o in dp1]
    dp = load_llm(VLLM_SPEC.replace("inproc=0", "dp=2"))  # conftest's engine, dp=2
    try:
        pool = dp.engine
        two = dp.generate(REQS)
        cores = sorted(os.sched_getaffinity(0))
        pinned = [r["cpus"] for r in pool.replicas]
    finally:
        dp.close()
    assert len(pinned) == 2 and not pool._procs  # both replicas ran, and close ended them
    if len(cores) >= 2:  # each replica on its own half of the cores
        half = len(cores) // 2
        assert pinned == [cores[:half], cores[half : 2 * half]]
    same = sum(a == b.text for a, b in zip(one, two, strict=True))
    record_property("dp2_vs_dp1", f"{same}/{len(REQS)}")
    assert [o.text for o in two] == one
    assert [o.prompt_tokens for o in two] == [len(dp.tokenizer(p)["input_ids"]) for p in PROMPTS]


def omp_bind(cores: list[int], replicas: int) -> str:
    """``VLLM_CPU_OMP_THREADS_BIND`` giving each replica its own share of ``cores`` (one
    ``|``-separated list per replica; with fewer cores than replicas they share)."""
    per = max(1, len(cores) // replicas)
    shares = [cores[r * per : (r + 1) * per] or cores[-per:] for r in range(replicas)]
    return "|".join(",".join(map(str, share)) for share in shares)


def requests_per_engine(metrics: str) -> dict[str, float]:
    """Finished requests per engine index, from the server's Prometheus text
    (``vllm:request_success_total{engine="1",finished_reason="length",...} 3.0``)."""
    done: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith("vllm:request_success_total{"):
            engine = re.search(r'engine="(\d+)"', line)
            if engine:
                done[engine[1]] = done.get(engine[1], 0.0) + float(line.rsplit(" ", 1)[1])
    return done


#: the recipe's data-parallel size
SERVE_DP = 2


def test_openai_against_a_data_parallel_server(dp1, tmp_path, record_property) -> None:
    import httpx

    from chunkwise.llm.embedded import converted_dir

    t0 = time.monotonic()
    port, log, template = _free_port(), tmp_path / "server.log", tmp_path / "chat.jinja"
    template.write_text(CHAT_TEMPLATE)
    cmd = serve_command(converted_dir(), port, template, SERVER_MAX_MODEL_LEN)
    cmd += ["--data-parallel-size", str(SERVE_DP)]
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": SERVER_KV_GB,
        "VLLM_CPU_OMP_THREADS_BIND": omp_bind(sorted(os.sched_getaffinity(0)), SERVE_DP),
    }
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        wait_healthy(proc, port, log, timeout=420)
        up = time.monotonic() - t0
        spec = (
            f"openai:{SERVED_NAME}@http://127.0.0.1:{port}/v1"
            "?concurrency=16&tokenizer=hf:default&timeout=120"
        )
        with load_llm(spec) as served:
            remote = served.generate(REQS)
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    finally:
        stop_group(proc)
    record_property("serve_dp2_start_s", round(up, 1))
    record_property("serve_dp2_total_s", round(time.monotonic() - t0, 1))
    assert [o.text for o in remote] == [o.text for o in dp1]
    assert [o.prompt_tokens for o in remote] == [o.prompt_tokens for o in dp1]
    served_by = requests_per_engine(metrics)
    record_property("requests_per_engine", served_by)
    # both engines answered some of the requests, and together all of them
    assert sorted(served_by) == ["0", "1"], (served_by, Path(log).read_text()[-2000:])
    assert min(served_by.values()) >= 1 and sum(served_by.values()) == len(REQS)
