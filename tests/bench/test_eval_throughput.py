"""bench/eval_throughput.py on the scripted passkey reader: the documents' map calls go out as
one merged batch, the table and the JSON (last line, top-level ratio) are printed."""

from __future__ import annotations

import json

from bench_loader import load_bench


def test_waves_merge_every_documents_map_calls_and_print_the_ratio(tmp_path, capsys):
    bench = load_bench("eval_throughput")
    out = tmp_path / "r.json"
    result = bench.main(
        ["--model", "scripted:passkey", "--docs", "4", "--doc-tokens", "1500", "--json", str(out)]
    )
    printed = capsys.readouterr().out.splitlines()
    assert json.loads(printed[-1]) == json.loads(out.read_text()) == result
    assert (
        "ratio" in result and result["ratio"] > 0 and any("MapReduce waves" in x for x in printed)
    )
    # the 4 documents' map calls (2 each) merged into the first backend batch
    assert result["waves"]["calls_per_batch_max"] == 4 and result["map_calls"] == 8
    assert result["waves"]["passkeys_found"] == "4/4"
