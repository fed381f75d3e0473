"""Data-parallel evaluation: `accelerate launch --multi_gpu --num_processes 2 eval/run.py` on CPU.

`--cpu --num_processes 2` would start a single process, so the test asserts that two ranks ran.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from two_ranks import ACCELERATE, launch_eval

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    not ACCELERATE.exists() and not shutil.which("accelerate"),
    reason="accelerate CLI not installed",
)
def test_two_processes_shard_and_merge(tmp_path):
    out = tmp_path / "run"
    res = launch_eval(out, "--limit=7", "--tasks=passkey,number_string")
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

    again = launch_eval(out, "--limit=7", "--tasks=passkey,number_string")  # resume: nothing left
    assert again.returncode == 0, again.stderr[-3000:]
    assert "new predictions" not in again.stderr
    assert json.loads((out / "results.json").read_text())["results"] == results["results"]
