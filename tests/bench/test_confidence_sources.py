"""bench/confidence_sources.py on the scripted passkey reader: one eval run per variant on the
same documents, each compared with ``off`` document by document."""

from __future__ import annotations

import json
from pathlib import Path

from bench_loader import load_bench


def test_variants_are_eval_runs_compared_with_off(tmp_path, capsys):
    bench = load_bench("confidence_sources")
    argv = ["--model", "scripted:passkey?ctx=4096", "--length", "2000", "--n", "2",
            "--window", "1024", "--out", str(tmp_path)]  # fmt: skip
    out = bench.main(argv)
    assert list(out["variants"]) == list(bench.VARIANTS)
    for name, v in out["variants"].items():
        assert v["n"] == 2 and len(v["confidence_source"]) == 2
        cfg = json.loads((Path(v["run_dir"]) / "results.json").read_text())["config"]
        assert cfg["strategy_args"] == bench.VARIANTS[name]
    assert set(out["against_off"]) == {"logprob", "self", "logprob_no_floor"}
    same = out["against_off"]["self"]
    assert set(same) == {"points", "ci95", "mcnemar_p"} and 0 <= same["mcnemar_p"] <= 1
    printed = capsys.readouterr().out
    assert "| variant | n |" in printed and "| off | 2 |" in printed
