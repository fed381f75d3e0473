"""Data-parallel evaluation: `accelerate launch --multi_gpu --num_processes 2 eval/run.py` on CPU.

`--cpu --num_processes 2` would start a single process, so the test asserts that two ranks ran.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ACCELERATE = Path(sys.executable).with_name("accelerate")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(out, *extra):
    cmd = [
        str(ACCELERATE),
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(free_port()),
        str(REPO / "eval" / "run.py"),
        "--config",
        str(REPO / "recipes" / "eval" / "passkey-smoke.yaml"),
        "--model=scripted:passkey",
        "--data=synthetic:400",
        f"--output={out}",
        "--no-progress",
        *extra,
    ]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=REPO)


@pytest.mark.skipif(
    not ACCELERATE.exists() and not shutil.which("accelerate"),
    reason="accelerate CLI not installed",
)
def test_two_processes_shard_and_merge(tmp_path):
    out = tmp_path / "run"
    res = launch(out, "--limit=7", "--tasks=passkey,number_string")
    assert res.returncode == 0, res.stderr[-3000:]
    summary = json.loads(res.stdout.strip().splitlines()[-1])  # printed by rank 0 only
    assert summary["world_size"] == 2
    assert "[rank 0/2]" in res.stderr and "[rank 1/2]" in res.stderr

    results = json.loads((out / "results.json").read_text())
    assert results["distributed"]["world_size"] == 2
    for task in ("passkey", "number_string"):
        # rank r answered examples r::2 -> 4 and 3 lines
        assert results["distributed"]["shard_lines"][task] == {"rank0": 4, "rank1": 3}
        preds = [
            json.loads(x) for x in (out / "predictions" / f"{task}.jsonl").read_text().splitlines()
        ]
        assert [p["id"] for p in preds] == list(range(7))  # complete, each once, in data order
        assert results["results"][task]["n"] == 7
    assert results["results"]["passkey"]["score"] == 100.0  # the scripted model reads pass keys
    assert not (out / "predictions" / "shards").exists()

    again = launch(out, "--limit=7", "--tasks=passkey,number_string")  # resume: nothing left
    assert again.returncode == 0, again.stderr[-3000:]
    assert "new predictions" not in again.stderr
    assert json.loads((out / "results.json").read_text())["results"] == results["results"]
