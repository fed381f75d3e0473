"""The demo's report: intervals decide better / worse / cannot tell, and the words follow."""

from __future__ import annotations

import dataclasses
import json

from chunkwise.demo.sizes import get_size
from chunkwise.demo.verdict import Cell, build_report, cells_from, compare_cells, verdict

SIZE = dataclasses.replace(
    get_size("small"),
    train_families=("passkey", "kv_retrieval"),
    eval_tasks=("passkey", "kv_retrieval", "number_string"),  # number_string: never trained on
    reference="hf:default-mr",
)


def summary(**cols):
    """cols: model_decoding -> {task: (score, lo, hi)}"""
    out = {}
    for col, tasks in cols.items():
        model, decoding = col.rsplit("_", 1)
        for task, (score, lo, hi) in tasks.items():
            out[f"{model.replace('_', '-')}/{decoding}/{task}"] = {
                "score": score,
                "ci95": [lo, hi],
                "n": 20,
            }
    return out


def test_only_intervals_that_do_not_overlap_count():
    a, b = Cell(40, 20, 60, 20), Cell(0, 0, 0, 20)
    assert compare_cells(a, b) == "better" and compare_cells(b, a) == "worse"
    assert compare_cells(Cell(40, 20, 60, 20), Cell(15, 0, 35, 20)) == "unclear"
    assert compare_cells(Cell(40, 20, 60, 20), Cell(15, 0, 20, 20)) == "unclear"  # touching


def test_the_verdict_says_when_the_demo_training_does_not_show_the_thesis():
    s = summary(
        base_mapreduce={"passkey": (90, 75, 100), "kv_retrieval": (0, 0, 0),
                        "number_string": (80, 60, 95)},
        sft_mapreduce_mapreduce={"passkey": (50, 30, 70), "kv_retrieval": (10, 0, 25),
                                 "number_string": (70, 50, 90)},
        reference_mapreduce={"passkey": (50, 30, 70), "kv_retrieval": (70, 50, 90),
                             "number_string": (75, 55, 95)},
    )  # fmt: skip
    words = verdict(cells_from(s), SIZE)
    assert words[0].startswith("The thesis does NOT show in this demo's own training")
    assert "worse than the base model on passkey: 50 [30, 70] vs 90 [75, 100]" in words[1]
    assert "kv_retrieval" in words[1] and "not distinguishable" in words[1]
    assert "better than the base model on kv_retrieval: 70 [50, 90] vs 0 [0, 0]" in words[2]
    assert "number_string (never trained on)" in words[2]
    assert "holds for the fully trained hf:default-mr on kv_retrieval" in words[3]


def test_the_verdict_says_when_the_thesis_shows(tmp_path):
    s = summary(
        base_standard={"passkey": (50, 30, 70), "kv_retrieval": (0, 0, 0),
                       "number_string": (45, 25, 65)},
        base_mapreduce={"passkey": (90, 75, 100), "kv_retrieval": (0, 0, 0),
                        "number_string": (80, 60, 95)},
        sft_mapreduce_mapreduce={"passkey": (95, 85, 100), "kv_retrieval": (45, 25, 65),
                                 "number_string": (85, 70, 100)},
    )  # fmt: skip
    report = build_report(s, SIZE, tmp_path / "report")
    assert report["verdict"][0].startswith("The thesis shows at this size")
    assert len(report["verdict"]) == 2  # no reference column: nothing said about it
    table = (tmp_path / "report" / "table.md").read_text()
    assert "| kv_retrieval | 0 [0, 0] | 0 [0, 0] | 45 [25, 65] |" in table
    assert "n = 20 held-out documents per cell" in table
    png = (tmp_path / "report" / "accuracy.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads((tmp_path / "report" / "report.json").read_text())
    assert saved["cells"]["sft-mapreduce/mapreduce/kv_retrieval"]["lo"] == 25
