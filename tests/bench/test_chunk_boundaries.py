"""bench/chunk_boundaries.py on the generated kv_retrieval documents, real Gemma tokenizer: the
chunker cuts no key-value pair, and without its clause level the same documents have pairs cut
in two (the straddles the evidence audit found)."""

from __future__ import annotations

import json

import pytest

from bench_loader import load_bench


@pytest.mark.slow
def test_the_clause_level_keeps_every_kv_pair_whole(tmp_path, capsys):
    bench = load_bench("chunk_boundaries")
    out = tmp_path / "cut.json"
    assert bench.main(["--families", "kv_retrieval", "--lengths", "8192", "--n", "50",
                       "--json", str(out)]) == 0  # fmt: skip
    (row,) = json.loads(out.read_text())["rows"]
    assert row["chunker"] == {"cut": 0, "spans": 50}
    assert row["no_clause"]["cut"] >= 1  # a word cut parts some key from its value
    assert "| kv_retrieval | 8192 | 0 of 50 |" in capsys.readouterr().out


def test_an_unknown_family_is_one_line(capsys):
    assert load_bench("chunk_boundaries").main(["--families", "nope"]) == 2
    assert "unknown families ['nope']" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--lengths", "4K"], ["--lengths", ""], ["--n", "0"]])
def test_bad_lengths_or_counts_are_one_line(argv, capsys):
    assert load_bench("chunk_boundaries").main(["--families", "kv_retrieval", *argv]) == 2
    assert "--lengths" in capsys.readouterr().err
