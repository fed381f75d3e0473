"""bench/ship_check.py: a candidate adapter's cells against the shipped adapter's published ones
(the committed docs/results files), judged by the 95% interval of the change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = [ROOT / "docs/results/default-mr-4k.json", ROOT / "docs/results/default-mr-8k-16k.json"]


def _candidate(path: Path, cells: dict[str, int]) -> Path:
    """A results file whose cells have ``k`` correct documents of 50 (k ones, then zeros)."""
    path.write_text(json.dumps({"arms": {"mr/mapreduce": {"cells": {
        name: {"accuracy": 2.0 * k, "ci95": [0, 100], "n": 50,
               "scores": [1.0] * k + [0.0] * (50 - k)}
        for name, k in cells.items()
    }}}}))  # fmt: skip
    return path


def test_each_shared_cell_is_judged_by_the_interval_of_its_change(tmp_path):
    from bench_loader import load_bench

    bench = load_bench("ship_check")
    # shipped (transcribed, no per-document scores): kv_retrieval@4000 88, kv@16000 90,
    # passkey@4000 and number_string@4000 100
    cand = _candidate(tmp_path / "c.json", {
        "kv_retrieval@4000": 50,     # +12: the interval above zero
        "kv_retrieval@16000": 44,    # -2: within noise
        "passkey@4000": 40,          # -20: the interval below zero
        "number_string@4000": 49,    # -2 against 100 [100, 100]: one miss is not a drop
        "kv_retrieval@4000:heldout-templates": 49,  # no shipped twin
    })  # fmt: skip
    out = bench.main(["--shipped", str(SHIPPED[0]), "--shipped", str(SHIPPED[1]),
                      "--candidate", str(cand), "--json", str(tmp_path / "o.json")])  # fmt: skip
    assert json.loads((tmp_path / "o.json").read_text()) == out
    verdicts = {name: r["verdict"] for name, r in out["cells"].items()}
    assert verdicts == {
        "kv_retrieval@4000": "rises",
        "kv_retrieval@16000": "within",
        "number_string@4000": "within",
        "passkey@4000": "drops",
    }
    kv = out["cells"]["kv_retrieval@4000"]
    assert kv["change"] == 12 and 0 < kv["change_ci95"][0] < 12 < kv["change_ci95"][1]
    assert out["drops"] == ["passkey@4000"] and out["no_drop"] is False
    assert "number_string@8000" in out["not_run"]
    assert out["only_candidate"] == ["kv_retrieval@4000:heldout-templates"]
    text = bench.table(out)
    assert "| passkey@4000 | 100 [100, 100] | 80 [" in text and "| drops |" in text
    assert "Drops (the whole interval below zero): passkey@4000." in text
    fine = _candidate(tmp_path / "f.json", {"passkey@4000": 50})
    out = bench.main(["--shipped", str(SHIPPED[0]), "--candidate", str(fine)])
    assert out["no_drop"] is True and "No cell drops" in bench.table(out)


def test_a_transcribed_cell_is_rebuilt_only_when_its_scores_are_0_or_1():
    from bench_loader import load_bench

    bench = load_bench("ship_check")
    assert (
        bench.scores_of("kv_retrieval@4000", {"accuracy": 88.0, "n": 50}) == [1.0] * 44 + [0.0] * 6
    )
    assert bench.scores_of("variable_tracking@4000", {"accuracy": 0.0, "n": 50}) == [0.0] * 50
    with pytest.raises(SystemExit, match="not a count"):
        bench.scores_of("variable_tracking@4000", {"accuracy": 40.0, "n": 50})
    with pytest.raises(SystemExit, match="not a count"):
        bench.scores_of("multihop@4000", {"accuracy": 33.3, "n": 50})


def test_a_cell_in_two_files_or_a_missing_arm_is_refused(tmp_path):
    from bench_loader import load_bench

    bench = load_bench("ship_check")
    a = _candidate(tmp_path / "a.json", {"passkey@4000": 50})
    with pytest.raises(SystemExit, match="also in another --candidate file"):
        bench.main(["--shipped", str(SHIPPED[0]), "--candidate", str(a), "--candidate", str(a)])
    with pytest.raises(SystemExit, match="no arm 'base/x' with cells"):
        bench.main(["--shipped", str(SHIPPED[0]), "--candidate", str(a), "--arm", "base/x"])
    (tmp_path / "list.json").write_text("[1]")
    with pytest.raises(SystemExit, match="list.json: no arm 'mr/mapreduce'"):
        bench.main(["--shipped", str(SHIPPED[0]), "--candidate", str(tmp_path / "list.json")])
    (tmp_path / "bad.json").write_text("{bad")
    for path in (tmp_path / "bad.json", tmp_path / "nothing.json"):
        with pytest.raises(SystemExit, match=path.name) as e:
            bench.main(["--shipped", str(SHIPPED[0]), "--candidate", str(path)])
        assert "\n" not in str(e.value)


def test_a_family_a_little_lower_at_every_length_drops_pooled(tmp_path):
    """kv_retrieval 14 points lower at 4K and at 16K (and passkey at one length only): neither
    cell's own interval excludes zero, the 100 kv documents pooled on each side do."""
    from bench_loader import load_bench

    bench = load_bench("ship_check")
    # shipped: kv_retrieval@4000 88 (44 of 50), kv_retrieval@16000 90 (45 of 50)
    cand = _candidate(tmp_path / "c.json", {
        "kv_retrieval@4000": 37,   # 74: -14
        "kv_retrieval@16000": 38,  # 76: -14
        "passkey@4000": 50,
    })  # fmt: skip
    out = bench.main(["--shipped", str(SHIPPED[0]), "--shipped", str(SHIPPED[1]),
                      "--candidate", str(cand)])  # fmt: skip
    assert out["cells"]["kv_retrieval@4000"]["verdict"] == "within"
    assert out["cells"]["kv_retrieval@16000"]["verdict"] == "within" and out["no_drop"]
    kv = out["families"]["kv_retrieval"]
    assert kv["cells"] == ["kv_retrieval@4000", "kv_retrieval@16000"]  # by length
    assert kv["n"] == {"shipped": 100, "candidate": 100}
    assert (kv["shipped"], kv["candidate"], kv["change"]) == (89, 75, -14)
    assert kv["verdict"] == "drops" and kv["change_ci95"][1] < 0
    assert "passkey" not in out["families"]  # one length: nothing to pool
    assert out["pooled_drops"] == ["kv_retrieval"]
    text = bench.table(out)
    assert "| kv_retrieval (4000, 16000) | 89 | 75 | -14 [" in text
    assert "pooled, kv_retrieval drops." in text


def test_the_make_target_benches_every_cell_the_shipped_adapter_published(tmp_path):
    """`make default-mr-ship-check` runs the candidate's bench cells and the check; here with a
    scripted reader at one document a cell (seconds): every cell of the shipped adapter's
    published files is compared, and the candidate has none the shipped side lacks. A
    published file added to SHIP_SHIPPED without its bench call, or a bench call dropped,
    leaves a cell not run."""
    import shutil
    import subprocess
    import sys

    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    venv = Path(sys.executable).parent.parent
    out = tmp_path / "ship"
    cmd = ["make", "-s", "-C", str(ROOT), "default-mr-ship-check", f"VENV={venv}",
           f"SHIP_PY={sys.executable}", "SHIP_MR=scripted:passkey", "SHIP_N=1",
           "SHIP_ARGS=prompts=chat,chunk_tokens=200", f"SHIP_OUT={out}"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    check = json.loads((out / "ship-check.json").read_text())
    assert check["not_run"] == [] and check["only_candidate"] == []
    shipped = {
        name
        for f in check["shipped_files"]
        for name in json.loads((ROOT / f).read_text())["arms"]["mr/mapreduce"]["cells"]
    }
    assert set(check["cells"]) == shipped and len(shipped) >= 18
