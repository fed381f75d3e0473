"""Each launcher rank (and each vLLM replica in it) gets its own devices: chunkwise.llm.devices,
the one function the hf and vLLM backends both ask."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest

from chunkwise.errors import BadInput
from chunkwise.llm.devices import local_rank, placement
from chunkwise.llm.vllm_replicas import split_by_tokens
from two_ranks import REPO, accelerate_launch, free_port

RANK1 = {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "RANK": "1", "WORLD_SIZE": "2"}


def test_without_a_launcher_one_copy_has_everything():
    where = placement(n_gpus=2, cpus=[0, 1, 2, 3], env={})
    assert (where.slot, where.slots, where.gpus, where.cpus) == (0, 1, (0,), (0, 1, 2, 3))
    assert where.device == "cuda:0" and not where.shared
    assert placement(n_gpus=0, cpus=[0, 1], env={}).device == "cpu"


def test_each_local_rank_gets_its_own_gpu_and_cores():
    seen = []
    for rank in range(2):
        env = {**RANK1, "LOCAL_RANK": str(rank)}
        gpu, cpu = placement(n_gpus=2, env=env), placement(n_gpus=0, cpus=[0, 1, 2, 3], env=env)
        seen.append((gpu.device, cpu.cpus))
    assert seen == [("cuda:0", (0, 1)), ("cuda:1", (2, 3))]


def test_replicas_and_tensor_parallel_take_consecutive_gpus_of_their_rank():
    # rank 1 of 2, dp=2 replicas of tp=2: slots 2 and 3 of 4 -> GPUs 4,5 and 6,7
    env = {**RANK1, "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    got = [placement(replica=r, replicas=2, per_slot=2, n_gpus=8, env=env) for r in range(2)]
    assert [p.gpus for p in got] == [(4, 5), (6, 7)]
    assert [p.cuda_visible for p in got] == ["4,5", "6,7"]
    # indices map through the user's own CUDA_VISIBLE_DEVICES
    env = {**RANK1, "CUDA_VISIBLE_DEVICES": "3,5"}
    assert placement(n_gpus=2, env=env).cuda_visible == "5"


def test_replicas_on_cpu_split_the_cores():
    got = [placement(replica=r, replicas=2, n_gpus=0, cpus=[4, 5], env={}) for r in range(2)]
    assert [p.cpus for p in got] == [(4,), (5,)] and all(p.shared for p in got)


def test_too_few_gpus_is_an_error_naming_the_numbers():
    with pytest.raises(BadInput, match="need 4 GPUs, but 2 are visible"):
        placement(replica=0, replicas=2, per_slot=2, n_gpus=2, env={})


def test_bad_launcher_variables_are_one_line_errors():
    with pytest.raises(BadInput, match="LOCAL_RANK=3 is outside LOCAL_WORLD_SIZE=2"):
        local_rank({"LOCAL_RANK": "3", "LOCAL_WORLD_SIZE": "2"})
    with pytest.raises(BadInput, match="expected whole numbers"):
        local_rank({"LOCAL_RANK": "x"})
    assert local_rank({"LOCAL_RANK": "1", "WORLD_SIZE": "2"}) == (1, 2)  # no LOCAL_WORLD_SIZE


def test_prompts_are_dealt_by_tokens():
    groups = split_by_tokens([100, 10, 90, 20, 5], 2)
    loads = [sum([100, 10, 90, 20, 5][i] for i in g) for g in groups]
    assert sorted(i for g in groups for i in g) == [0, 1, 2, 3, 4]
    assert abs(loads[0] - loads[1]) <= 15 and groups == [sorted(g) for g in groups]
    assert split_by_tokens([3], 2) == [[0], []]


# what a rank resolves inside a real two-rank launch: the hf backend's device, the vLLM engine's
# CUDA_VISIBLE_DEVICES (as if the node had 2 GPUs), and its CPU cores after hf pins them
PROBE = textwrap.dedent(
    """
    import json, os, sys
    from chunkwise.llm.devices import pin_cpus, placement
    gpu = placement(n_gpus=2)
    cpu = placement(n_gpus=0)
    pin_cpus(cpu)
    print("PROBE " + json.dumps({
        "world": int(os.environ["WORLD_SIZE"]), "rank": int(os.environ["LOCAL_RANK"]),
        "hf_device": gpu.device, "vllm_visible": gpu.cuda_visible,
        "cpus": sorted(os.sched_getaffinity(0)), "omp": os.environ["OMP_NUM_THREADS"],
    }), flush=True)
    """
)


@pytest.mark.slow
def test_two_launched_ranks_resolve_different_devices(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(REPO / "src")}
    res = subprocess.run(
        accelerate_launch(str(script), port=free_port()),
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=REPO,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    probes = [json.loads(x[6:]) for x in res.stdout.splitlines() if x.startswith("PROBE ")]
    probes.sort(key=lambda p: p["rank"])
    assert [p["world"] for p in probes] == [2, 2]  # a silent one-process run fails here
    assert [(p["hf_device"], p["vllm_visible"]) for p in probes] == [
        ("cuda:0", "0"),
        ("cuda:1", "1"),
    ]
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) >= 2:  # each rank on its own half of the cores
        assert not set(probes[0]["cpus"]) & set(probes[1]["cpus"])
        assert probes[0]["omp"] == str(len(cores) // 2)


@pytest.fixture
def restore_cores():
    import torch

    cores, threads, omp = (
        os.sched_getaffinity(0),
        torch.get_num_threads(),
        os.environ.get("OMP_NUM_THREADS"),
    )
    yield
    os.sched_setaffinity(0, cores)
    torch.set_num_threads(threads)
    if omp is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    else:
        os.environ["OMP_NUM_THREADS"] = omp


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 cores to split")
def test_hf_backend_loads_rank_1_on_rank_1s_cores(tiny_llama, monkeypatch, restore_cores):
    from chunkwise.llm import GenerationParams, Request, load_llm

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    for k, v in RANK1.items():
        monkeypatch.setenv(k, v)
    cores = sorted(os.sched_getaffinity(0))
    half = len(cores) // 2
    llm = load_llm(f"hf:{tiny_llama}?ctx=256")
    assert str(llm.device) == "cpu"
    assert sorted(os.sched_getaffinity(0)) == cores[half : 2 * half]  # rank 1's half
    out = llm.generate([Request("The sky is", GenerationParams(max_new_tokens=4))])
    assert out[0].completion_tokens <= 4 and out[0].prompt_tokens > 0
