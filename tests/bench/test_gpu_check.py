"""bench/gpu_check.sh --dry-run: every phase of the prepared GPU check runs its logic on CPU with
tiny sizes (the real sizes differ only in numbers), so the script cannot fail on the GPU machine
for a typo or a renamed function; the one JSON summary names every phase and each passed."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from bench_loader import load_bench

REPO = Path(__file__).resolve().parents[2]
PHASES = ("env", "sdpa", "resume", "pretrained", "gpu_train", "generate", "eval2")


@pytest.mark.slow
def test_dry_run_runs_every_phase_and_prints_one_summary(tmp_path):
    out = tmp_path / "check"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        ["bash", str(REPO / "bench" / "gpu_check.sh"), "--dry-run", "--out", str(out)],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary == json.loads((out / "summary.json").read_text())
    phases = summary["phases"]
    assert tuple(phases) == PHASES
    failed = {k: v for k, v in phases.items() if not v.get("ok")}
    assert not failed, json.dumps(failed, indent=1)[-4000:]
    assert summary["ok"] is True
    assert phases["env"]["versions"]["torch"] and phases["env"]["matmul_tflops"] > 0
    assert phases["sdpa"]["sequences"] == [320, 192] and phases["sdpa"]["grads_finite"]
    resume = phases["resume"]
    assert resume["resumed_from"] == resume["killed_after"] and resume["killed_rc"] != 0
    assert resume["resumed_losses"] == pytest.approx(resume["straight_losses"], abs=1e-3)
    runs = phases["pretrained"]["runs"]
    assert set(runs) == {"full", "lora_bf16_base"}
    assert all(r["step1_loss"] < phases["pretrained"]["ln_vocab"] * 0.6 for r in runs.values())
    assert [r["seq_len"] for r in phases["gpu_train"]["runs"]] == [256, 512]
    assert all(r["decode_tok_per_sec"] > 0 for r in phases["generate"]["runs"])
    assert phases["eval2"]["predictions"] == 4


def test_a_failing_phase_fails_the_summary_not_the_script(tmp_path):
    """A phase that crashes or times out is reported in the summary (ok false, its log), and
    a phase never run is named as such."""
    gpu_check = load_bench("gpu_check")
    (tmp_path / "env.json").write_text(json.dumps({"ok": True}))
    (tmp_path / "sdpa.rc").write_text("124\n")
    (tmp_path / "sdpa.log").write_text("gpu_check: sdpa ...")
    s = gpu_check.summary(tmp_path)
    assert s["ok"] is False and s["phases"]["env"]["ok"] is True
    assert s["phases"]["sdpa"]["error"] == "timed out"
    assert s["phases"]["eval2"]["rc"] == "not run"
