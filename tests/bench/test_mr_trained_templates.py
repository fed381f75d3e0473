"""bench/mr_trained.py's held-out-template cells and its confidence-by-source report on
conflicting evidence (issue #49)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench_loader import load_bench
from chunkwise.data.families import Doc, Evidence, wordings

ROOT = Path(__file__).resolve().parents[2]


def conflict_doc(true: str = "4821", false: str = "7310") -> Doc:
    return Doc(
        "c", "conflicting", "...", "What is the access code of the mill?", true,
        evidence=[Evidence(0, 1, "direct", "p", true), Evidence(2, 3, "retracted", "w", false)],
    )  # fmt: skip


def event(answer: str | None, confidence: float | None, stage: str = "map") -> dict:
    return {
        "stage": stage,
        "inputs": [0],
        "output": {"answer": answer, "confidence": confidence, "no_information": answer is None},
    }


def test_source_confidences_reads_the_map_findings_of_each_source():
    bench = load_bench("mr_trained")
    doc = conflict_doc()
    trace = [
        event(None, 0.0),  # nothing here
        event("The code is 4821.", 4.0),
        event("4821", 5.0),  # the highest plain finding counts
        event("7310", 2.0),
        event("48210", 5.0),  # another number: names neither
        event("4821 or 7310", 5.0),  # names both: counts for neither
        event("7310", 4.5, stage="collapse"),  # not a map finding
    ]
    assert bench.source_confidences(doc, trace) == {"plain": 5.0, "weak": 2.0}
    assert bench.source_confidences(doc, [event("7310", 1.0)]) == {"plain": None, "weak": 1.0}
    # no map call scored anything (standard decoding, confidence=off): not a document to count
    assert bench.source_confidences(doc, [event("4821", None)]) is None
    assert bench.source_confidences(doc, []) is None


def test_source_summary_means_and_the_share_where_the_plain_source_wins():
    bench = load_bench("mr_trained")
    per_doc = [
        {"plain": 5.0, "weak": 2.0},  # right one higher
        {"plain": 2.0, "weak": 2.0},  # a tie: not higher (the failure)
        {"plain": 4.0, "weak": 5.0},  # wrong one higher
        {"plain": 5.0, "weak": None},  # weak never extracted
        {"plain": None, "weak": 1.0},  # plain never extracted
        None,  # not scored
    ]
    s = bench.source_summary(per_doc)
    assert s["n"] == 5
    assert (s["plain_mean"], s["plain_n"]) == (4.0, 4)
    assert (s["weak_mean"], s["weak_n"]) == (2.5, 4)
    assert (s["right_higher"], s["right_higher_n"]) == (pytest.approx(100 / 3, abs=0.01), 3)
    assert s["right_higher_all"] == 40.0  # 2 of 5, a missing finding scoring 0
    assert len(s["right_higher_ci95"]) == 2
    assert bench.source_summary([None, None]) is None
    out = {"arms": {"mr/mapreduce": {"source_confidence": {"conflicting": s}}}}
    md = bench.sources_table(out)
    assert "| mr/mapreduce | conflicting | 5 | 4.0 (4) | 2.5 (4) |" in md


def test_template_summary_groups_documents_by_the_wording_they_were_given():
    bench = load_bench("mr_trained")
    cells = [
        {
            "scores": [1.0, 0.0, 0.0],
            "templates": [
                {"question": "cf-q0", "plain": "cf-memo-p0", "retracted": "cf-memo-r0"},
                {"question": "cf-q0", "plain": "cf-memo-p1", "hedged": "cf-memo-h0"},
                {"question": "cf-q1", "plain": "cf-memo-p0", "retracted": "cf-memo-r0"},
            ],
            "sources": [
                {"plain": 5.0, "weak": 1.0},
                {"plain": 5.0, "weak": 5.0},
                {"plain": 5.0, "weak": 4.0},
            ],
        },
        {"scores": [1.0], "templates": [None], "sources": [None]},  # an older ledger row
    ]
    t = bench.template_summary(cells)
    assert t["question/cf-q0"] == {"n": 2, "accuracy": 50.0}
    assert t["question/cf-q1"] == {"n": 1, "accuracy": 0.0}
    assert t["weak/cf-memo-r0"] == {"n": 2, "accuracy": 50.0, "weak_mean": 2.5, "weak_n": 2}
    assert t["weak/cf-memo-h0"]["weak_mean"] == 5.0
    assert not any(k.startswith("plain/") for k in t)  # the plain statement is not a slot here
    out = {"arms": {"mr/mapreduce": {"by_template": {"conflicting": t}}}}
    assert "| mr/mapreduce | conflicting | weak/cf-memo-r0 | 2 | 50.0 | 2.5 (2) |" in (
        bench.template_table(out)
    )


def test_cell_names_and_template_options():
    bench = load_bench("mr_trained")
    assert bench.cell_name("kv_retrieval", 4000) == "kv_retrieval@4000"
    held = bench.cell_name("kv_retrieval", 4000, "heldout")
    assert held == "kv_retrieval@4000:heldout-templates"
    assert bench.parse_cell(held) == ("kv_retrieval", 4000, "heldout")
    assert bench.parse_cell("kv_retrieval@4000") == ("kv_retrieval", 4000, "train")
    assert bench.parse_templates("train, heldout") == ["train", "heldout"]
    with pytest.raises(SystemExit, match="--templates 'seen'"):
        bench.parse_templates("seen")


def test_seen_and_held_out_template_cells_are_reported_apart(tmp_path):
    out = tmp_path / "b"
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "mr_trained.py"), "--base", "scripted:passkey",
         "--mr", "scripted:passkey", "--mr-args", "prompts=chat", "--families",
         "passkey,conflicting", "--lengths", "800", "--n", "2", "--templates", "train,heldout",
         "--arms", "base/mapreduce,mr/mapreduce,mr/mapreduce-nocal", "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((out / "results.json").read_text())
    mr = res["arms"]["mr/mapreduce"]
    assert set(mr["cells"]) == {
        "passkey@800", "passkey@800:heldout-templates",
        "conflicting@800", "conflicting@800:heldout-templates",
    }  # fmt: skip
    base = res["arms"]["base/mapreduce"]["families"]  # the scripted reader finds every key
    assert base["passkey"]["accuracy"] == base["passkey:heldout-templates"]["accuracy"] == 100.0
    assert set(res["arms"]["mr/mapreduce-nocal"]["cells"]) == {
        "conflicting@800", "conflicting@800:heldout-templates"
    }  # fmt: skip
    assert {"conflicting_cal_minus_nocal", "conflicting_cal_minus_nocal:heldout-templates"} <= set(
        res["differences"]
    )
    md = (out / "table.md").read_text()
    assert "| passkey:heldout-templates |" in md
    # accuracy per template: each cell's documents are reported under their own selection's ids
    by = mr["by_template"]
    held = {t.id for t in wordings.all_templates() if t.split == "heldout"}
    for label, per in by.items():
        ids = {k.split("/", 1)[1] for k in per}
        assert ids and (ids <= held if label.endswith(":heldout-templates") else not ids & held)
    assert any(k.startswith("weak/cf-inquiry-") for k in by["conflicting:heldout-templates"])
    assert sum(t["n"] for k, t in by["passkey"].items() if k.startswith("question/")) == 2
    # the cells' documents differ in wording only, so each is keyed by its own documents
    rows = [json.loads(x) for x in (out / "cells.jsonl").read_text().splitlines()]
    assert len({r["key"] for r in rows if "arm" in r}) == 10
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "mr_trained.py"), "--templates", "seen",
         "--out", str(tmp_path / "x")],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode != 0 and "--templates 'seen'" in r.stderr
