"""bench/mr_trained.py end to end with a scripted model at tiny n (the real run takes hours)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_mr_trained_bench_writes_json_table_and_png(tmp_path):
    out = tmp_path / "b"
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "mr_trained.py"), "--base", "scripted:passkey",
         "--mr", "scripted:passkey", "--mr-args", "prompts=chat", "--families",
         "passkey,conflicting", "--lengths", "800", "--n", "3", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((out / "results.json").read_text())
    assert (out / "mr_trained.png").stat().st_size > 1000
    assert "| passkey |" in (out / "table.md").read_text()
    pk = res["arms"]["base/mapreduce"]["families"]["passkey"]
    assert pk["accuracy"] == 100.0 and pk["n"] == 3 and pk["ci95"] == [100.0, 100.0]
    assert set(res["arms"]["mr/mapreduce-nocal"]["families"]) == {"conflicting"}
    assert res["arms"]["mr/mapreduce-nocal"]["options"]["calibration"] is False
    assert "conflicting_cal_minus_nocal_ge_20" in res["goals"]
