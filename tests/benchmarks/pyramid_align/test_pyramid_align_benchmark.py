"""Held-out Pyramid-Align records as a benchmark, and `compare` merging one model's runs."""

from __future__ import annotations

import json

import pytest

from chunkwise.benchmarks import get_benchmark
from chunkwise.errors import BadInput
from chunkwise.eval.compare import compare, load_run
from chunkwise.eval.runner import EvalConfig, run_eval
from chunkwise.llm.scripted import ScriptedLLM


def record(i, capital, answer):
    return {
        "id": f"r{i}",
        "source_id": f"doc{i}.txt",
        "document": f"Filler text. The capital is {capital}. More filler.",
        "question": "What is the capital?",
        "intermediate": {"map": [], "collapse": []},
        "answer": answer,
        "meta": {},
    }


@pytest.fixture
def records_file(tmp_path):
    path = tmp_path / "heldout.jsonl"
    rows = [record(0, "Paris", "Paris"), record(1, "Rome", "Lyon")]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_loads_records_and_refuses_invalid_ones(records_file, tmp_path):
    bench = get_benchmark("pyramid_align")
    files = bench.parse_data(str(records_file))
    td = bench.load("qa", files, limit=None)
    assert [e["id"] for e in td.examples] == ["r0", "r1"]
    assert td.examples[0]["answer"] == ["Paris"] and td.source["total"] == 2
    # a synth output folder is read through its data/ shards
    (tmp_path / "synth" / "data").mkdir(parents=True)
    (tmp_path / "synth" / "data" / "part.jsonl").write_text(records_file.read_text())
    assert len(bench.load("qa", bench.parse_data(str(tmp_path / "synth"))).examples) == 2
    with pytest.raises(BadInput, match="Pyramid-Align"):
        bench.parse_data(str(tmp_path / "missing"))
    with pytest.raises(BadInput):
        bench.load("summaries", files)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(BadInput, match="empty.jsonl"):
        bench.load("qa", bench.parse_data(str(empty)))
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "a", "document": "x"}\nnot json\n')
    with pytest.raises(BadInput, match=r"broken.jsonl:1: 'question' is missing"):
        bench.load("qa", bench.parse_data(str(broken)))
    broken.write_text(json.dumps({**record(0, "Oslo", "Oslo"), "document": ""}) + "\n")
    with pytest.raises(BadInput, match=r"broken.jsonl:1: 'document' is empty"):
        bench.load("qa", bench.parse_data(str(broken)))


def test_scores_against_the_teacher_answers_and_merges_in_compare(records_file, tmp_path):
    reader = ScriptedLLM(rules=[(r"capital is (\w+)", r"\1")], default="unknown")
    for strategy in ("standard",):
        root = tmp_path / "eval" / "base" / strategy
        res = run_eval(
            EvalConfig(
                model="scripted:reader",
                strategy=strategy,
                benchmark="pyramid_align",
                tasks=["qa"],
                data=str(records_file),
                output=str(root / "heldout"),
            ),
            llm=reader,
            progress=False,
        )
        assert res["results"]["qa"]["n"] == 2
        assert res["results"]["qa"]["score"] == pytest.approx(50.0)  # Paris right, Rome != Lyon
        other = root / "retrieval"
        other.mkdir()
        (other / "results.json").write_text(
            json.dumps(
                {
                    "results": {"passkey": {"score": 100.0, "n": 1, "alias": "passkey"}},
                    "config": {"model": "scripted:reader", "strategy": strategy},
                }
            )
        )
    run = load_run(tmp_path / "eval" / "base" / "standard")
    assert run.label == "standard" and run.scores == {"qa": 50.0, "passkey": 100.0}
    table = compare([tmp_path / "eval" / "base" / "standard"])
    assert table["run_average"]["standard"] == pytest.approx(75.0)
