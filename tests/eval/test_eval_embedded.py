"""End to end: `chunkwise eval` on the embedded model (hf:default), synthetic passkey at 4K
tokens, under both decoding modes, one document each. Slow (under a minute of CPU per mode)."""

from __future__ import annotations

import json

import pytest

from chunkwise import cli


@pytest.fixture
def main(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", {"eval": "evaluate", "compare": "compare"})
    return cli.main


@pytest.mark.slow
def test_passkey_4k_standard_and_mapreduce(main, tmp_path, capsys):
    runs = {}
    for strategy in ("standard", "mapreduce"):
        out = tmp_path / strategy
        args = [
            "eval",
            "--model",
            "hf:default",
            "--strategy",
            strategy,
            "--tasks",
            "passkey",
            "--data",
            "synthetic:4096",
            "--limit",
            "1",
            "--output",
            str(out),
            "--no-progress",
        ]
        assert main(args) == 0
        preds = [
            json.loads(x) for x in (out / "predictions" / "passkey.jsonl").read_text().splitlines()
        ]
        res = json.loads((out / "results.json").read_text())
        assert [p["id"] for p in preds] == [0]
        assert all(len(p["ground_truth"]) == 5 and p["ground_truth"].isdigit() for p in preds)
        assert res["data"]["passkey"] == {"source": "synthetic", "length": 4096, "seed": 0, "n": 1}
        assert res["model"]["prompt_kind"] == "base"  # the embedded model is a base model
        assert res["results"]["passkey"]["errors"] == 0
        runs[strategy] = (preds, res)

    std_preds, std = runs["standard"]
    for p in std_preds:
        assert p["stats"]["llm_calls"] == 1 and not p["stats"]["document_truncated"]
        assert 3900 <= p["stats"]["prompt_tokens"] <= 4400
        assert p["stats"]["completion_tokens"] <= 6  # the official passkey budget
    mr_preds, mr = runs["mapreduce"]
    for p in mr_preds:
        assert p["stats"]["chunks"] >= 4 and p["stats"]["llm_calls"] >= p["stats"]["chunks"] + 1
        assert [e["stage"] for e in p["trace"]][-1] == "reduce"
    # measured (2 CPU cores, greedy): both find the first document's key (standard decoding
    # misses the second one's, placed last, answering "a key that is used to")
    assert std["results"]["passkey"]["score"] == 100.0
    assert mr["results"]["passkey"]["score"] == 100.0
    assert mr["strategy_stats"]["all"]["llm_calls"] > std["strategy_stats"]["all"]["llm_calls"]

    capsys.readouterr()
    assert (
        main(
            [
                "compare",
                str(tmp_path / "standard"),
                str(tmp_path / "mapreduce"),
                "--plot",
                str(tmp_path / "cmp.png"),
            ]
        )
        == 0
    )
    table = capsys.readouterr().out
    a, b = std["results"]["passkey"]["score"], mr["results"]["passkey"]["score"]
    assert f"| passkey | {a:.2f} | {b:.2f} | {(a + b) / 2:.2f} |" in table
    assert (tmp_path / "cmp.png").stat().st_size > 5000
