"""LongAlign's weighted loss across 2 data-parallel ranks and gradient accumulation equals the
naive mean of per-sequence mean losses (and its gradient), on CPU with gloo."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from two_ranks import ACCELERATE, accelerate_launch

HERE = Path(__file__).resolve().parent


@pytest.mark.skipif(not ACCELERATE.exists(), reason="accelerate CLI not installed")
def test_weighted_loss_two_ranks_matches_mean_of_means(tmp_path):
    out = tmp_path / "result.json"
    env = {
        **os.environ,
        "WANDB_MODE": "disabled",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "CUDA_VISIBLE_DEVICES": "",
    }
    cmd = accelerate_launch(str(HERE / "ddp_loss_worker.py"), str(out))
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    res = json.loads(out.read_text())
    assert res["world"] == 2  # a silent single-process run would fail here
    for weighting in ("sequence", "token"):
        r = res[weighting]
        assert r["loss"] == pytest.approx(r["reference"], rel=1e-5), weighting
        assert r["grad_rel_diff"] < 1e-4, weighting
    seq = res["sequence"]
    assert seq["units"] == seq["sequences"] > 4  # M counts every sequence of the step once
