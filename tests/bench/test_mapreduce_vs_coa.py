"""bench/mapreduce_vs_coa.py on the scripted passkey reader: each run is an eval run folder,
MapReduce's chunk size carries over to coa_same, a rerun reads the finished runs."""

from __future__ import annotations

import json
from pathlib import Path

from bench_loader import load_bench

ARGV = ["--model", "scripted:passkey?ctx=4096", "--length", "3000", "--window", "1024"]


def test_runs_are_eval_runs_on_one_document(tmp_path, capsys, monkeypatch):
    bench = load_bench("mapreduce_vs_coa")
    out = bench.main([*ARGV, "--out", str(tmp_path)])
    printed = capsys.readouterr().out.strip().splitlines()
    assert json.loads(printed[-1]) == json.loads(json.dumps(out))
    assert [json.loads(x)["run"] for x in printed[:-1]] == ["mr", "coa", "coa_same"]
    runs = out["runs"]
    assert runs["mr"]["correct"] and runs["mr"]["llm_calls"] > 1
    assert runs["coa"]["options"] == {} and runs["coa_same"]["options"]["chunk_tokens"] > 0
    assert out["document_tokens"] > 2000 and "coa_over_mr_wall" in out
    for r in runs.values():
        results = json.loads((Path(r["run_dir"]) / "results.json").read_text())
        assert results["results"]["passkey"]["n"] == 1
        assert results["config"]["context_window"] == 1024

    # a rerun reads the finished runs: nothing is answered again
    def answered(cfg, **kw):
        raise AssertionError(f"{cfg.output} was run again")

    monkeypatch.setattr("chunkwise.eval.runner.run_eval", answered)
    again = bench.main([*ARGV, "--out", str(tmp_path), "--runs", "mr,coa"])
    assert again["runs"]["mr"] == runs["mr"] and set(again["runs"]) == {"mr", "coa"}
