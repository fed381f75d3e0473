"""End to end on a real model: `chunkwise eval` of our MapReduce (the shipped hf:default-mr
adapter with its own options) on InfiniteBench's own passkey layout scores what the predictions
file holds. The score in results.json must equal the official rule applied to the predictions
against their ground truth (issue #47, defect 0: our chat reduce writes "Rationale: Part N ...
Answer: KEY", and the reference's processing, once the default, scored the raw text's first
integer, N). Then a rescore with another --extract builds no backend. Slow: a few minutes of
CPU for three ~1.2K-token documents."""

from __future__ import annotations

import json

import pytest

from chunkwise import cli
from chunkwise.benchmarks.infinitebench.metrics import score_one, score_predictions_file

#: InfiniteBench's passkey noise and needle (construct_synthetic_dataset.py)
NOISE = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
NEEDLE = "The pass key is {key}. Remember it. {key} is the pass key."
KEYS = ["62070", "48213", "90517"]


def _official_passkey_folder(tmp_path):
    """``passkey.jsonl`` in the official layout: {id, context, input, answer, options}."""
    data = tmp_path / "data"
    data.mkdir()
    with (data / "passkey.jsonl").open("w", encoding="utf-8") as f:
        for i, key in enumerate(KEYS):
            reps, at = 56, [10, 30, 50][i]  # ~1.2K tokens, the needle at three depths
            parts = [NOISE] * reps
            parts.insert(at, NEEDLE.format(key=key))
            rec = {
                "id": i,
                "context": " ".join(parts),
                "input": "What is the pass key?",
                "answer": [key],
                "options": [],
            }
            f.write(json.dumps(rec) + "\n")
    return data


@pytest.mark.slow
def test_results_score_is_the_predictions_score(tmp_path, monkeypatch, capsys):
    from chunkwise.llm import default_mr

    if not (default_mr.package_dir() / "adapter_model.safetensors").is_file():
        pytest.skip("no hf:default-mr adapter committed yet: run `make default-mr`")
    monkeypatch.setattr(cli, "COMMANDS", {"eval": "evaluate"})
    out = tmp_path / "run"
    args = [
        "eval",
        "--model=hf:default-mr",
        "--strategy=mapreduce",
        "--strategy-args=grounding=true,snap_quotes=true,anchor_quotes=true,prompts=chat,"
        "chunk_tokens=500",
        "--context-window=4096",
        "--tasks=passkey",
        f"--data={_official_passkey_folder(tmp_path)}",
        f"--output={out}",
        "--no-progress",
    ]
    assert cli.main(args) == 0, capsys.readouterr().err
    capsys.readouterr()
    res = json.loads((out / "results.json").read_text())
    block = res["results"]["passkey"]
    preds_file = out / "predictions" / "passkey.jsonl"
    preds = [json.loads(x) for x in preds_file.read_text().splitlines()]
    assert [p["id"] for p in preds] == [0, 1, 2] and block["n"] == 3 and block["errors"] == 0
    assert all(p["stats"]["chunks"] >= 2 for p in preds)
    assert block["extract"] == "parsed"  # auto under our MapReduce prompts
    # the score is what the predictions give against their ground truth, under the official rule
    want = 100 * sum(score_one("passkey", p["prediction"], p["ground_truth"]) for p in preds) / 3
    assert block["score"] == pytest.approx(want), [
        (p["prediction"], p["raw_output"]) for p in preds
    ]
    # and what `chunkwise score` gives on that file by default
    assert score_predictions_file("passkey", preds_file, extract="auto")["score"] == pytest.approx(
        want
    )

    # a rescore with the reference's processing: no backend, same predictions
    def no_backend(*a, **k):
        raise AssertionError("a rescore constructed a model backend")

    monkeypatch.setattr("chunkwise.llm.load_llm", no_backend)
    assert cli.main([*args, "--extract=mapreduce"]) == 0, capsys.readouterr().err
    ref = json.loads((out / "results_official_mapreduce.json").read_text())
    raw = [score_one("passkey", p["raw_output"], p["ground_truth"]) for p in preds]
    assert ref["results"]["passkey"]["score"] == pytest.approx(100 * sum(raw) / 3)
    assert ref["model"] == res["model"] and ref["timing"]["model_loaded"] is False
    print(
        "parsed:",
        block["score"],
        "reference processing:",
        ref["results"]["passkey"]["score"],
        [p["raw_output"] for p in preds],
    )
