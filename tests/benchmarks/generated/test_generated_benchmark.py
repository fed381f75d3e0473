"""Generated documents with ground truth as a benchmark: held-out seeds, the family's query and
its own scoring rule, through the real eval runner."""

from __future__ import annotations

import pytest

from chunkwise.benchmarks import get_benchmark
from chunkwise.data.families import HELDOUT_SEED, TRAIN_SEED, get_family
from chunkwise.errors import BadInput
from chunkwise.eval.run_dir import read_records
from chunkwise.eval.runner import EvalConfig, run_eval
from chunkwise.llm.scripted import ScriptedLLM


def count(text: str) -> int:
    return len(text) // 4


def test_data_spec_names_the_split_and_length():
    bench = get_benchmark("generated")
    spec = bench.parse_data("heldout:3000")
    assert (spec.split, spec.length, spec.seed()) == ("heldout", 3000, HELDOUT_SEED + 3000)
    assert bench.parse_data("train:2000").seed() == TRAIN_SEED
    for bad in ("", "heldout", "heldout:abc", "test:3000", "heldout:50", "synthetic:4000"):
        with pytest.raises(BadInput, match="heldout:<tokens>"):
            bench.parse_data(bad)


def test_held_out_documents_are_not_the_training_ones_and_carry_their_ground_truth():
    bench = get_benchmark("generated")
    held = bench.load("kv_retrieval", bench.parse_data("heldout:1000"), limit=5, count_tokens=count)
    train = bench.load("kv_retrieval", bench.parse_data("train:1000"), limit=5, count_tokens=count)
    assert len(held.examples) == 5 and held.source["seed"] == HELDOUT_SEED + 1000
    assert not {e["context"] for e in held.examples} & {e["context"] for e in train.examples}
    ex = held.examples[0]
    assert ex["answer"]["answer"] in ex["context"]  # the reference is the generator's, a span
    q = bench.build_query("kv_retrieval", ex, "chat")
    doc = get_family("kv_retrieval").make(
        n=5, seed=HELDOUT_SEED + 1000, length_tokens=1000, count_tokens=count
    )[0]
    assert q == doc.query()  # asked exactly as the oracle teacher asks
    with pytest.raises(BadInput, match="at least 1"):
        bench.load("passkey", bench.parse_data("heldout:1000"), limit=0, count_tokens=count)
    with pytest.raises(BadInput, match="unknown generated task"):
        bench.load("summaries", bench.parse_data("heldout:1000"), count_tokens=count)


def test_each_family_scores_by_its_own_rule():
    bench = get_benchmark("generated")
    assert bench.score("passkey", "The pass key is 12345.", {"answer": "12345"}, "official", "none")
    assert not bench.score("passkey", "It is 123456.", {"answer": "12345"}, "official", "none")
    # variable tracking: recall of the assigned names, 0 when a wrong one is named
    gold = {"answer": "ABCDE, FGHIJ"}
    assert bench.score("variable_tracking", "ABCDE", gold, "official", "none") == 0.5
    assert bench.score("variable_tracking", "ABCDE, ZZZZZ", gold, "official", "none") == 0.0


def test_runs_through_the_eval_runner_with_intervals(tmp_path):
    reader = ScriptedLLM(rules=[(r"pass key is (\d+)", r"\1")], default="none")
    res = run_eval(
        EvalConfig(
            model="scripted:reader",
            strategy="standard",
            benchmark="generated",
            tasks=["passkey"],
            data="heldout:400",
            limit=6,
            context_window=4096,
            output=str(tmp_path / "run"),
        ),
        llm=reader,
        progress=False,
    )
    r = res["results"]["passkey"]
    assert r["n"] == 6 and r["score"] == pytest.approx(100.0)
    assert len(r["score_ci95"]) == 2


class BatchLog(ScriptedLLM):
    """The scripted reader, remembering how many requests each backend call carried."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.sizes: list[int] = []

    def _generate(self, requests):
        self.sizes.append(len(requests))
        return super()._generate(requests)


@pytest.mark.parametrize("strategy", ["standard", "mapreduce"])
def test_parallel_examples_share_batches_and_predict_the_same(tmp_path, strategy):
    def run(parallel: int) -> tuple[dict, list[int]]:
        reader = BatchLog(rules=[(r"pass key is (\d+)", r"\1")], default="none")
        cfg = EvalConfig(
            model="scripted:reader",
            strategy=strategy,
            strategy_args={"chunk_tokens": 150} if strategy == "mapreduce" else {},
            benchmark="generated",
            tasks=["passkey"],
            data="heldout:400",
            limit=6,
            context_window=4096,
            parallel=parallel,
            output=str(tmp_path / f"p{parallel}"),
        )
        res = run_eval(cfg, llm=reader, progress=False)
        preds = {
            r["id"]: (r["prediction"], r["stats"]["llm_calls"])
            for r in read_records(tmp_path / f"p{parallel}" / "predictions" / "passkey.jsonl")
        }
        assert res["results"]["passkey"]["n"] == 6
        return preds, reader.sizes

    one, one_sizes = run(1)
    three, three_sizes = run(3)
    assert three == one  # the same answers, whatever finished first
    assert sum(three_sizes) == sum(one_sizes)  # the same requests ...
    assert len(three_sizes) < len(one_sizes)  # ... in fewer, larger backend calls
    if strategy == "standard":  # one call per example: three examples per backend call
        assert (one_sizes, three_sizes) == ([1] * 6, [3, 3])


def test_parallel_must_be_a_positive_whole_number(tmp_path):
    for bad in (0, -2, 1.5, True):
        with pytest.raises(BadInput, match="parallel"):
            EvalConfig(parallel=bad, output=str(tmp_path)).resolved()  # type: ignore[arg-type]
