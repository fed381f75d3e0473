"""L-Eval: options split off QuALITY's instructions, gold letters, the registered benchmark on
the shared data, and ``--data`` required."""

from __future__ import annotations

import pytest

from chunkwise.benchmarks import get_benchmark
from chunkwise.benchmarks.leval import scoring
from chunkwise.benchmarks.leval.loader import gold_letter, split_options
from chunkwise.errors import BadInput


def test_leval_option_split_and_gold_letter():
    q, opts = split_options("Why?\n\n (A) one\n (B) two\n wrapped\n (C) three \n (D) four")
    assert q == "Why?" and opts == ["one", "two wrapped", "three", "four"]
    assert gold_letter("(C) three", opts) == "C" and gold_letter("four", opts) == "D"


def test_leval_benchmark_on_shared_data(shared_dir):
    bench = get_benchmark("leval")
    spec = bench.parse_data(str(shared_dir / "data" / "leval"))
    td = bench.load("quality", spec, limit=3)
    assert td.total == 202 and len(td.examples) == 3
    ex = td.examples[0]
    q = bench.build_query("quality", ex, "base", None)
    assert q.task == "multiple_choice" and len(q.options) == 4
    gold = ex["answer"]
    assert bench.score("quality", f"({gold['letter']})", gold, "official", "none") == 1.0
    td = bench.load("scientific_qa", spec, limit=2)
    ex = td.examples[0]
    assert bench.score("scientific_qa", ex["answer"][0], ex["answer"], "official", "none") == 1.0
    assert scoring.score_answer("narrative_qa", "his father", ["His father"], "bleu1") > 0


@pytest.mark.parametrize("data", ["", "hub", "default"])
def test_leval_needs_data(data):
    with pytest.raises(BadInput, match="needs --data"):
        get_benchmark("leval").parse_data(data)
