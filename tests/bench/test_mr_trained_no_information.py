"""bench/mr_trained.py's report on parts that hold none of the evidence: the share whose map
said NO INFORMATION (issue #49's goal: >= 90%), the share that sent the reduce nothing, and the
findings from them that were kept or dropped (by which check); and on the parts that hold it:
whether a right finding reached the reduce, and what the reduce made of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bench_loader import load_bench
from chunkwise.data.families import Doc, Evidence

ROOT = Path(__file__).resolve().parents[2]


def part(span: tuple[int, int], answer: str | None, dropped: str | None = None) -> dict:
    out = {"answer": answer, "confidence": 5.0, "no_information": answer is None, "span": span}
    if dropped:
        out["dropped"] = dropped
    return {"stage": "map", "inputs": [span[0]], "output": out}


def test_empty_parts_counts_only_the_parts_without_evidence():
    bench = load_bench("mr_trained")
    doc = Doc(
        "k", "kv_retrieval", "x" * 400, "q", "v", evidence=[Evidence(150, 170, "direct", "t", "v")]
    )
    trace = [
        part((0, 100), None),  # answer-free, quiet
        part((100, 160), "v"),  # holds the start of the evidence: not counted
        part((160, 260), None),  # holds its end: not counted
        part((260, 330), "the key"),  # answer-free, a finding that was kept (a distractor)
        part((330, 400), "the key", dropped="question_echo"),  # answer-free, dropped by a check
        {"stage": "reduce", "inputs": [0], "output": {"answer": "v", "span": (0, 400)}},
    ]
    assert bench.empty_parts(doc, trace) == {
        "parts": 3,
        "said_none": 1,
        "kept": 1,
        "dropped_by": {"question_echo": 1},
    }
    # standard decoding (no map call with a span) has no parts to count
    assert bench.empty_parts(doc, [{"stage": "answer", "inputs": [], "output": {}}]) is None


def test_empty_summary_pools_parts_and_resamples_documents():
    bench = load_bench("mr_trained")
    per_doc = [
        {"parts": 8, "said_none": 6, "kept": 0, "dropped_by": {"question_echo": 2}},
        {"parts": 2, "said_none": 0, "kept": 2, "dropped_by": {}},
        {"parts": 0, "said_none": 0, "kept": 0},  # every part held evidence: no say
        None,  # not a mapreduce trace
    ]
    s = bench.empty_summary(per_doc)
    assert (s["docs"], s["parts"], s["said_none"], s["kept"]) == (2, 10, 6, 2)
    assert s["share"] == 60.0  # pooled over parts, not the mean of 75% and 0%
    assert s["ci95"][0] < 60.0 < s["ci95"][1] <= 100.0
    # what the reduce sees: the two echoes were dropped, so 8 of 10 parts sent it nothing
    assert s["quiet_share"] == 80.0 and s["quiet_ci95"][0] < 80.0 < s["quiet_ci95"][1]
    assert s["dropped"] == 2 and s["dropped_by"] == {"question_echo": 2}
    assert s["kept_per_doc"] == 1.0
    assert bench.empty_summary([None]) is None
    out = {"arms": {"mr/mapreduce": {"no_information": {"kv_retrieval": s}}}}
    table = bench.empty_table(out)
    assert "| mr/mapreduce | kv_retrieval | 2 | 10 | 60" in table
    assert "| 2 (1.0) | 2: question_echo 2 |" in table
    # rows answered before the checks were named: the count, without names
    old = bench.empty_summary([{"parts": 4, "said_none": 1, "kept": 1}])
    assert old["dropped"] == 2 and old["dropped_by"] == {} and old["quiet_share"] == 75.0
    assert "| 1 (1.0) | 2 |" in bench.empty_table({"arms": {"a": {"no_information": {"f": old}}}})


def test_answer_parts_counts_the_parts_with_evidence_and_which_findings_are_right():
    bench = load_bench("mr_trained")
    doc = Doc(
        "k",
        "kv_retrieval",
        "x" * 400,
        "q",
        "v1",
        evidence=[Evidence(150, 250, "direct", "t", "v1")],
    )
    trace = [
        part((0, 100), "v1"),  # answer-free: not counted here
        part((100, 160), None),  # holds the evidence's start, said NO INFORMATION
        part((160, 200), "v1", dropped="misquoted"),  # holds some, a check dropped it
        part((200, 230), "v2"),  # kept, wrong
        part((230, 300), "the value is v1"),  # kept, right
        part((240, 260), None) | {"output": {"span": (240, 260), "extracted_information": "v1"}},
        {"stage": "reduce", "inputs": [0], "output": {"answer": "v1", "span": (0, 400)}},
    ]
    score = lambda text: float("v1" in text)  # noqa: E731
    assert bench.answer_parts(doc, trace, score) == {
        "parts": 5, "said_none": 1, "kept": 3, "right": 2, "dropped_by": {"misquoted": 1},
    }  # fmt: skip
    assert bench.answer_parts(doc, [{"stage": "answer", "inputs": [], "output": {}}], score) is None


def test_answer_summary_splits_the_reduces_accuracy_by_what_it_was_sent():
    """Three documents' reduces got a right finding (two answered right), two did not (one
    right anyway); a document whose parts held no evidence, and an older row, are left out."""
    bench = load_bench("mr_trained")

    def d(parts, said, kept, right, **dropped):
        return {"parts": parts, "said_none": said, "kept": kept, "right": right,
                "dropped_by": dropped}  # fmt: skip

    per_doc = [d(2, 0, 2, 1), d(1, 0, 1, 1), d(3, 1, 1, 1, misquoted=1), d(2, 2, 0, 0),
               d(1, 0, 0, 0, question_echo=1), d(0, 0, 0, 0), None]  # fmt: skip
    scores = [1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0]
    s = bench.answer_summary(per_doc, scores)
    assert (s["docs"], s["parts"], s["said_none"], s["kept"], s["right"]) == (5, 9, 3, 4, 3)
    assert s["said_share"] == pytest.approx(100 * 3 / 9, abs=0.01)
    assert s["dropped"] == 2 and s["dropped_by"] == {"misquoted": 1, "question_echo": 1}
    assert s["reached"]["accuracy"] == 60.0 and s["reached"]["n"] == 5
    assert s["reached"]["ci95"][0] < 60.0 < s["reached"]["ci95"][1]
    assert (s["accuracy_reached"]["accuracy"], s["accuracy_reached"]["n"]) == (
        pytest.approx(66.67),
        3,
    )
    assert (s["accuracy_missed"]["accuracy"], s["accuracy_missed"]["n"]) == (50.0, 2)
    assert bench.answer_summary([None, d(0, 0, 0, 0)], [0.0, 1.0]) is None
    table = bench.answering_table({"arms": {"mr/mapreduce": {"answering": {"passkey": s}}}})
    assert (
        "| mr/mapreduce | passkey | 5 | 9 | 33.33 | 2: misquoted 1, question_echo 1 | 4 (3) |"
        in table
    )
    assert "| 66.67 (3) | 50 (2) |" in table


@pytest.mark.slow
def test_a_run_reports_no_information_per_family_and_arm(tmp_path):
    """A scripted run: the reader answers a pass key where one is and "I don't know." elsewhere:
    not the protocol's NO INFORMATION, so no answer-free part counts as saying it, and with no
    grounding check every such reply reaches the reduce as a finding. Standard decoding
    reports nothing."""
    out = tmp_path / "b"
    r = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "mr_trained.py"), "--base", "scripted:passkey",
         "--mr", "scripted:passkey", "--mr-args", "prompts=chat,chunk_tokens=200", "--families",
         "passkey", "--lengths", "1200", "--n", "2", "--arms", "base/standard,mr/mapreduce",
         "--out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads((out / "results.json").read_text())
    s = res["arms"]["mr/mapreduce"]["no_information"]["passkey"]
    assert s["docs"] == 2 and s["parts"] >= 4 and s["share"] == 0.0
    assert s["kept"] == s["parts"] and s["kept_per_doc"] == s["parts"] / 2
    assert s["quiet_share"] == 0.0 and s["dropped"] == 0
    assert not res["arms"]["base/standard"].get("no_information")
    assert "said NO INFORMATION" in (out / "table.md").read_text()
    # the parts holding the pass key: the scripted reader finds it (its reply, out of the four
    # fields, is the finding's extracted information), but its reduce says "I don't know."
    a = res["arms"]["mr/mapreduce"]["answering"]["passkey"]
    assert a["docs"] == 2 and a["parts"] >= 2 and a["right"] >= 2 and a["said_none"] == 0
    assert a["reached"]["accuracy"] == 100.0
    assert a["accuracy_reached"]["accuracy"] == 0.0 and a["accuracy_missed"] is None
    assert "docs whose reduce got a right finding" in (out / "table.md").read_text()
