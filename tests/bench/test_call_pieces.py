"""bench/call_pieces.py on the scripted echo model: both arms answer every call, the cached arm
in ceil(calls / piece) backend calls, and the JSON (last line) carries the ratio."""

from __future__ import annotations

import json

from bench_loader import load_bench


def test_the_cached_arm_sends_its_calls_in_pieces_and_the_ratio_is_printed(tmp_path, capsys):
    bench = load_bench("call_pieces")
    out = tmp_path / "r.json"
    result = bench.main(["--model", "scripted:echo", "--calls", "10", "--piece", "4",
                         "--prompt-tokens", "20", "--json", str(out)])  # fmt: skip
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == result
    assert json.loads(out.read_text()) == result
    whole, pieces = result["arms"]["whole"], result["arms"]["pieces"]
    assert whole["backend_calls"] == 2 and pieces["backend_calls"] == 2 * 3  # 2 rounds; 4+4+2
    assert whole["new_tokens"] == pieces["new_tokens"] > 0  # the same work in both arms
    assert result["pieces_over_whole"] > 0


def test_a_bad_model_spec_is_one_line():
    import pytest

    bench = load_bench("call_pieces")
    with pytest.raises(SystemExit, match="^call_pieces: --model nope:x: invalid model spec"):
        bench.main(["--model", "nope:x"])
