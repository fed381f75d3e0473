"""Question rules, node sampling by kind, and the cross-document batching LLM."""

from __future__ import annotations

import random
import threading

import pytest

from chunkwise.errors import BadInput
from chunkwise.llm import GenerationParams, Request
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.synth.calls import BatchingLLM, Meter, StageLLM
from chunkwise.synth.pyramid import Node, Pyramid
from chunkwise.synth.questions import (
    answer_problem,
    clean_question,
    node_kind,
    parse_mix,
    question_problem,
    sample_nodes,
)

NODE = (
    "The harbor master counts the fishing boats every morning and records the numbers in "
    "a leather ledger kept at the lighthouse."
)


def test_clean_question_joins_stem_and_cuts_after_question_mark():
    assert (
        clean_question(" does the harbor master count? He counts boats.", "What")
        == "What does the harbor master count?"
    )
    assert (
        clean_question("Question: Where is the ledger kept?\nmore") == "Where is the ledger kept?"
    )
    assert clean_question("", "Why") == "Why"


@pytest.mark.parametrize(
    ("q", "reason"),
    [
        ("What does the harbor master count", "malformed"),  # no question mark
        ("Why boats?", "malformed"),  # too short
        ("What is 1234 5678 9012 3456 7890?", "malformed"),
        ("What is the Answer: boats?", "malformed"),
        ("Which of the following statements about boats is true?", "refers_to_missing_context"),
        ("What do you think about the harbor master?", "refers_to_missing_context"),
        ("How does quantum chromodynamics explain gluon confinement?", "ungrounded"),
        ("What does the harbor master count every morning?", None),
        ("Where are the numbers of the fishing boats recorded?", None),
    ],
)
def test_question_rules(q, reason):
    assert question_problem(q, NODE) == reason


def test_duplicates_by_normal_form_and_overlap():
    kept = ["What does the harbor master count every morning?"]
    assert (
        question_problem("what does the Harbor Master count every morning?", NODE, kept)
        == "duplicate"
    )
    assert (
        question_problem("What does the harbor master count each morning?", NODE, kept)
        == "duplicate"
    )
    assert question_problem("Where is the leather ledger kept?", NODE, kept) is None


def test_answer_rules():
    for bad in (
        "",
        "  ",
        "[NO INFORMATION]",
        "No information.",
        "Unknown",
        "not mentioned in the text",
        "I don't know",
        "???",
    ):
        assert answer_problem(bad) == "no_answer", bad
    assert answer_problem("Forty two boats.") is None


def _pyramid() -> Pyramid:
    leaves = [Node(f"0.{i}", 0, f"leaf {i} text.", leaves=(i, i)) for i in range(6)]
    mids = [
        Node("1.0", 1, "mid a.", ["0.0", "0.1", "0.2"], (0, 2)),
        Node("1.1", 1, "mid b.", ["0.3", "0.4", "0.5"], (3, 5)),
    ]
    root = Node("2.0", 2, "root.", ["1.0", "1.1"], (0, 5))
    return Pyramid([*leaves, *mids, root], "2.0")


def test_sampling_follows_the_mix_and_prefers_unused_nodes():
    p = _pyramid()
    assert [node_kind(p, n) for n in p.nodes] == ["leaf"] * 6 + ["mid"] * 2 + ["root"]
    rng = random.Random(0)
    draws = sample_nodes(p, 3000, {"leaf": 0.5, "mid": 0.25, "root": 0.25}, rng)
    kinds = [k for _, k in draws]
    assert abs(kinds.count("leaf") / 3000 - 0.5) < 0.05
    assert abs(kinds.count("root") / 3000 - 0.25) < 0.05
    only_leaves = sample_nodes(p, 6, {"leaf": 1.0, "mid": 0, "root": 0}, random.Random(1))
    assert sorted(n.id for n, _ in only_leaves) == [f"0.{i}" for i in range(6)]  # all distinct
    one_leaf = Pyramid([Node("0.0", 0, "x.")], "0.0")
    assert [k for _, k in sample_nodes(one_leaf, 2, {"leaf": 1.0, "mid": 0, "root": 0}, rng)] == [
        "root",
        "root",
    ]


def test_parse_mix():
    assert parse_mix("leaf=1,root=1") == {"leaf": 1.0, "mid": 0.0, "root": 1.0}
    assert parse_mix(None) == {"leaf": 0.4, "mid": 0.3, "root": 0.3}
    for bad in ("leaf=x", "branch=1", "leaf=-1", "leaf=0,root=0"):
        with pytest.raises(BadInput):
            parse_mix(bad)


def test_batching_llm_coalesces_calls_of_waiting_workers():
    inner = ScriptedLLM(rules=[(r"(\d+)$", r"echo \1")])
    llm = BatchingLLM(inner, max_wait_s=5.0)
    results: dict[int, list[str]] = {}
    barrier = threading.Barrier(3)

    def worker(i: int) -> None:
        with llm.worker():
            barrier.wait()
            outs = llm.generate([Request(f"prompt {i}{j}", GenerationParams()) for j in range(2)])
            results[i] = [o.text for o in outs]

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == {i: [f"echo {i}0", f"echo {i}1"] for i in range(3)}
    assert llm.batches == [(6, 3)]  # one batch for all three workers


def test_batching_llm_spreads_errors_and_works_unregistered():
    class Boom(ScriptedLLM):
        def _generate(self, requests):
            raise RuntimeError("backend down")

    llm = BatchingLLM(Boom())
    with llm.worker(), pytest.raises(RuntimeError, match="backend down"):
        llm.generate([Request("x")])
    ok = BatchingLLM(ScriptedLLM(default="fine"))
    assert ok.generate([Request("x")])[0].text == "fine"


def test_stage_llm_meters_calls_and_tokens():
    meter = Meter()
    llm = StageLLM(ScriptedLLM(default="two words"), "summary", meter)
    llm.generate([Request("a b c"), Request("d")])
    d = meter.to_dict()["summary"]
    assert d["calls"] == 2 and d["prompt_tokens"] == 4 and d["completion_tokens"] == 4
    assert llm.count_tokens("a b") == 2 and llm.context_window == 8192
