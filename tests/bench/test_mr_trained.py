"""bench/mr_trained.py end to end with a scripted model at tiny n (the real run takes hours)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_mr_trained_bench_writes_json_table_and_png(tmp_path):
    out = tmp_path / "b"
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "mr_trained.py"), "--base", "scripted:passkey",
         "--mr", "scripted:passkey", "--mr-args", "prompts=chat", "--families",
         "passkey,conflicting", "--lengths", "800,1000", "--n", "3", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((out / "results.json").read_text())
    assert (out / "mr_trained.png").stat().st_size > 1000
    md = (out / "table.md").read_text()
    assert "| passkey |" in md and "| passkey@1000 | " in md  # by family, and by length
    pk = res["arms"]["base/mapreduce"]["families"]["passkey"]
    assert pk["accuracy"] == 100.0 and pk["n"] == 6 and pk["ci95"] == [100.0, 100.0]
    assert res["arms"]["base/mapreduce"]["cells"]["passkey@1000"]["n"] == 3
    assert set(res["arms"]["mr/mapreduce-nocal"]["families"]) == {"conflicting"}
    assert res["arms"]["mr/mapreduce-nocal"]["options"]["calibration"] is False
    assert res["arms"]["mr/mapreduce-noconf"]["options"]["confidence"] == "off"
    assert set(res["arms"]["mr/mapreduce-noconf"]["families"]) == {"conflicting"}
    cal = res["differences"]["conflicting_cal_minus_nocal"]
    assert (cal["a"], cal["b"], cal["n"]) == ("mr/mapreduce", "mr/mapreduce-nocal", 6)
    assert "goals" not in res and "| conflicting_cal_minus_nocal |" in md


def test_mr_trained_bench_keeps_finished_cells_and_adds_up_runs_of_other_arms(tmp_path):
    out = tmp_path / "b"
    base = [sys.executable, str(ROOT / "bench" / "mr_trained.py"), "--base", "scripted:passkey",
            "--mr", "scripted:passkey", "--mr-args", "prompts=chat", "--families", "passkey",
            "--lengths", "800", "--n", "2", "--out", str(out)]  # fmt: skip

    def bench(*extra: str) -> dict:
        r = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert r.returncode == 0, r.stderr[-2000:]
        return json.loads((out / "results.json").read_text())

    def rows() -> list[dict]:
        return [json.loads(x) for x in (out / "cells.jsonl").read_text().splitlines()]

    first = bench("--arms", "base/standard")
    assert set(first["arms"]) == {"base/standard"}
    lines = (out / "cells.jsonl").read_text().splitlines()
    assert [r.get("doc", r.get("arm")) for r in rows()] == [0, 1, "base/standard"]
    # a crash mid-cell, in the middle of writing document 1's row: the cut line is dropped,
    # and the rerun answers document 1 only, then finishes the cell
    (out / "cells.jsonl").write_text(lines[0] + "\n" + lines[1][:40])
    resumed = bench("--arms", "base/standard")
    assert [r.get("doc", r.get("arm")) for r in rows()] == [0, 1, "base/standard"]
    assert rows()[0] == json.loads(lines[0]) and rows()[1]["run"] != rows()[0]["run"]
    assert (
        resumed["arms"]["base/standard"]["families"] == first["arms"]["base/standard"]["families"]
    )
    both = bench("--arms", "base/standard,base/mapreduce")
    assert set(both["arms"]) == {"base/standard", "base/mapreduce"}
    cells = [r["arm"] for r in rows() if "arm" in r]
    assert cells == ["base/standard", "base/mapreduce"]  # standard not rerun
    assert both["arms"]["base/standard"]["families"] == first["arms"]["base/standard"]["families"]
    # a report from the ledger as it stands: nothing runs, nothing is written
    before = (out / "cells.jsonl").read_text()
    report = bench("--report-only")
    assert report["arms"] == both["arms"] and (out / "cells.jsonl").read_text() == before
    r = subprocess.run([*base, "--report-only", "--out", str(tmp_path / "empty")],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)  # fmt: skip
    assert r.returncode != 0 and "no cells.jsonl" in r.stderr
    # every cell records the commit that answered it; a cell left from older code is named
    assert list(both["code"].values()) == [2]
    assert "Warning" not in (out / "table.md").read_text()
    stale = [json.dumps({**r, "code": "0ld0ld0ld0ld"}) if r.get("arm") == "base/standard"
             else json.dumps(r) for r in rows()]  # fmt: skip
    (out / "cells.jsonl").write_text("\n".join(stale) + "\n")
    mixed = bench("--report-only")
    assert mixed["code"]["0ld0ld0ld0ld"] == 1 and sum(mixed["code"].values()) == 2
    assert mixed["arms"]["base/standard"]["cells"]["passkey@800"]["code"] == "0ld0ld0ld0ld"
    md = (out / "table.md").read_text()
    assert "answered by 2 commits" in md and "0ld0ld0ld0ld (1 cells)" in md
    # another n is another experiment: nothing reused
    again = bench("--arms", "base/standard", "--n", "3")
    assert again["arms"]["base/standard"]["families"]["passkey"]["n"] == 3


def test_mr_trained_bench_answers_documents_in_parallel_in_document_order():
    from bench_loader import load_bench
    from chunkwise.data.families import get_family
    from chunkwise.llm import load_llm
    from chunkwise.strategies import get_strategy

    bench = load_bench("mr_trained")
    llm = load_llm("scripted:passkey")
    fam = get_family("passkey")
    docs = fam.make(n=5, seed=123, length_tokens=900, count_tokens=llm.count_tokens)
    strategy = get_strategy("mapreduce", window=1400, chunk_tokens=300)
    one = bench.answers(strategy, docs, llm, 1)
    many = bench.answers(strategy, docs, llm, 4)
    assert [d for d, _ in many] == docs
    assert [t for _, t in many] == [t for _, t in one]
    assert len({t for _, t in one}) == 5  # five different passkeys: an order mix-up would show
    assert all(fam.score(d, t) == 1.0 for d, t in many)


def test_mr_trained_cells_are_keyed_by_their_documents(monkeypatch):
    """A changed document generator (or another seed) reuses no finished cell."""
    import argparse
    from dataclasses import replace

    from bench_loader import load_bench
    from chunkwise.data.families import get_family

    bench = load_bench("mr_trained")
    arm = {"name": "mr/mapreduce", "model": "scripted:passkey", "strategy": "mapreduce",
           "opts": {}, "window": 4096}  # fmt: skip
    args = argparse.Namespace(n=2, seed=0)
    before = bench._ledger_key(arm, "conflicting@800", args)
    assert bench._ledger_key(arm, "conflicting@800", args) == before
    assert bench._ledger_key(arm, "conflicting@800", argparse.Namespace(n=2, seed=1)) != before
    cls = type(get_family("conflicting"))
    make = cls.make
    monkeypatch.setattr(
        cls,
        "make",
        lambda self, **kw: [replace(d, context=d.context + ".") for d in make(self, **kw)],
    )
    bench.documents_fingerprint.cache_clear()
    assert bench._ledger_key(arm, "conflicting@800", args) != before


def test_the_differences_are_paired_on_the_same_documents():
    from bench_loader import load_bench

    bench = load_bench("mr_trained")

    def arm(scores: list[float]) -> dict:
        return {"cells": {"conflicting@4000": {"scores": scores}}}

    with_block = [1.0] * 10
    without = [1.0] * 7 + [0.0] * 3
    no_score = [0.0] * 5 + [1.0] * 5
    out = {"arms": {"mr/mapreduce": arm(with_block), "mr/mapreduce-nocal": arm(without),
                    "mr/mapreduce-noconf": arm(no_score)}}  # fmt: skip
    d = bench.differences(out)
    assert set(d) == {"conflicting_cal_minus_nocal", "conflicting_score_minus_noscore"}
    cal = d["conflicting_cal_minus_nocal"]
    assert cal["points"] == 30.0 and cal["n"] == 10 and "met" not in cal  # measured, not judged
    lo, hi = cal["ci95_paired"]
    assert 0 <= lo < 30 < hi <= 60
    assert d["conflicting_score_minus_noscore"]["points"] == 50.0
    # paired: two arms that miss the same documents differ by exactly 0, however many misses
    half = [1.0, 0.0] * 5
    out["arms"]["mr/mapreduce"], out["arms"]["mr/mapreduce-nocal"] = arm(half), arm(half)
    same = bench.differences(out)["conflicting_cal_minus_nocal"]
    assert same["points"] == 0.0 and same["ci95_paired"] == [0.0, 0.0]
    # the same documents or nothing: a cell answered on fewer documents is refused
    out["arms"]["mr/mapreduce-nocal"] = arm([1.0] * 9)
    with pytest.raises(ValueError, match="not paired"):
        bench.differences(out)


def test_a_bad_option_is_one_line_not_a_traceback(tmp_path):
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "mr_trained.py"), "--mr", "scripted:passkey",
         "--mr-args", "chunk_tokens=abc", "--arms", "mr/mapreduce", "--families", "passkey",
         "--lengths", "4000", "--n", "1", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "mr_trained.py: error: strategy 'mapreduce': option chunk_tokens='abc' is not valid; "
        "expected a whole number"
    ]
