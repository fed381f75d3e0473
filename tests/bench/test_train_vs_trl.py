"""bench/train_vs_trl.py: both sides train the same saved model on the same examples and the
JSON carries a top-level ratio, both loss curves and the tail-loss comparison; without trl
installed the bench says so and exits 0."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench_loader import load_bench

REPO = Path(__file__).resolve().parents[2]


def test_without_trl_the_bench_says_so(monkeypatch, capsys):
    bench = load_bench("train_vs_trl")
    monkeypatch.setitem(sys.modules, "trl", None)  # import trl -> ImportError
    assert bench.main(["--steps", "2"]) == 0
    assert "trl is not installed" in capsys.readouterr().out


@pytest.mark.slow
def test_a_short_run_compares_both_sides(tmp_path):
    pytest.importorskip("trl")
    out = tmp_path / "res.json"
    bench = [sys.executable, str(REPO / "bench" / "train_vs_trl.py")]
    proc = subprocess.run(
        [
            *bench,
            "--steps=4",
            "--tail=2",
            "--records=4",
            "--max-tokens=1024",
            "--threads=1",
            f"--json={out}",
        ],
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    res = json.loads(out.read_text())
    assert res["ratio"] == pytest.approx(res["ours"]["tok_per_sec"] / res["trl"]["tok_per_sec"])
    for side in ("ours", "trl"):
        s = res[side]
        assert len(s["losses"]) == 4 and all(math.isfinite(x) for x in s["losses"])
        assert s["tokens"] > 0 and s["seconds"] > 0
    # the same starting weights and the same kind of data: step 1 is the random model's loss
    # on both sides, near ln(vocab = 1024) = 6.93
    assert res["ours"]["losses"][0] == pytest.approx(res["trl"]["losses"][0], rel=0.02)
    assert "ratio ours/trl" in proc.stdout
