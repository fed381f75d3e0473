"""The evidence audit against hand-built traces: every outcome of the vocabulary, the first
failure winning, funnels adding up to n, and the evidence spans it starts from."""

from __future__ import annotations

import pytest

from chunkwise.benchmarks.evidence import answer_strings, check_spans, locate
from chunkwise.errors import BadInput
from chunkwise.eval.audit import OUTCOMES, audit_prediction, funnel, outcome_of
from chunkwise.eval.audit.evidence import Evidence
from chunkwise.eval.audit.outcomes import decide, states
from chunkwise.eval.audit.saved import audit_task, saved_prompts
from chunkwise.strategies.standard import kept_spans

DOC = "filler. " * 20 + "The pass key is 4123. Remember it. " + "filler. " * 20
KEY = "4123"
START = DOC.index("The pass key")
END = START + len("The pass key is 4123.")


def ev(spans=((START, END),), gold=(KEY,)) -> Evidence:
    spans = None if spans is None else list(spans)
    return Evidence(spans, [DOC[s:e] for s, e in spans or []], list(gold))


def map_event(idx, span, answer=None, info="", **extra):
    out = {
        "answer": answer,
        "extracted_information": info,
        "no_information": answer is None,
        "span": list(span),
        **extra,
    }
    return {"stage": "map", "inputs": [idx], "output": out, "round": 0}


HOLDER = (START - 10, END + 10)
OTHER = (0, START - 10)


def mr_trace(holder_out=None, collapse=(), reduce_answer=KEY):
    holder = holder_out or map_event(1, HOLDER, KEY, f"The pass key is {KEY}.")
    trace = [map_event(0, OTHER), holder, *collapse]
    trace.append({"stage": "reduce", "inputs": [1], "output": {"answer": reduce_answer}})
    return trace


def audit(strategy, trace, prompts=None, prediction="", score=0.0, evidence=None):
    return audit_prediction(strategy, evidence or ev(), trace, prompts, prediction, score)


# -- one hand-built trace per outcome ---------------------------------------------------------

CASES = {
    "correct": lambda: audit("standard", [], [f"Read: {DOC} Q?"], KEY, 1.0),
    "evidence_truncated": lambda: audit("standard", [], ["Read: filler. ... Q?"], "7", 0.0),
    "evidence_not_retrieved": lambda: audit("retrieval", [], ["Context: filler. Q?"], "7", 0.0),
    "not_extracted": lambda: audit("mapreduce", mr_trace(map_event(1, HOLDER)), None, "", 0.0),
    "filtered_no_information": lambda: audit(
        "mapreduce",
        mr_trace(map_event(1, HOLDER, None, f"pass key is {KEY}")),
        None,
        "",
        0.0,
    ),
    "filtered_confidence_floor": lambda: audit(
        "mapreduce",
        mr_trace(map_event(1, HOLDER, KEY, dropped="confidence_floor")),
        None,
        "",
        0.0,
    ),
    "filtered_unscored": lambda: audit(
        "mapreduce", mr_trace(map_event(1, HOLDER, KEY, dropped="unscored")), None, "", 0.0
    ),
    "filtered_ungrounded": lambda: audit(
        "mapreduce", mr_trace(map_event(1, HOLDER, KEY, dropped="ungrounded")), None, "", 0.0
    ),
    "filtered_misquoted": lambda: audit(
        "mapreduce", mr_trace(map_event(1, HOLDER, KEY, dropped="misquoted")), None, "", 0.0
    ),
    "filtered_question_echo": lambda: audit(
        "mapreduce", mr_trace(map_event(1, HOLDER, KEY, dropped="question_echo")), None, "", 0.0
    ),
    "lost_in_collapse": lambda: audit(
        "mapreduce",
        mr_trace(
            collapse=[
                {
                    "stage": "collapse",
                    "inputs": [0, 1],
                    "round": 1,
                    "output": {"answer": KEY, "no_information": False},
                },
                {
                    "stage": "collapse",
                    "inputs": [0, 1],
                    "round": 2,
                    "output": {"answer": "99", "no_information": False},
                },
            ]
        ),
        None,
        "99",
        0.0,
    ),
    "lost_in_memory": lambda: audit(
        "chain_of_agents",
        [
            {
                "stage": "worker",
                "inputs": [0],
                "round": 1,
                "output": {"span": list(OTHER), "memory": ""},
            },
            {
                "stage": "worker",
                "inputs": [1],
                "round": 2,
                "output": {"span": list(HOLDER), "memory": f"pass key {KEY}"},
            },
            {
                "stage": "worker",
                "inputs": [2],
                "round": 3,
                "output": {"span": [END + 10, len(DOC)], "memory": "nothing"},
            },
            {"stage": "manager", "inputs": [0, 1, 2], "output": {"memory": "nothing"}},
        ],
        None,
        "",
        0.0,
    ),
    "reduce_ignored": lambda: audit("mapreduce", mr_trace(reduce_answer="99"), None, "99", 0.0),
    "wrong_despite_evidence": lambda: audit("standard", [], [f"{DOC} Q?"], "99", 0.0),
    "correct_without_evidence": lambda: audit("standard", [], ["filler ... Q?"], KEY, 1.0),
    "unknown": lambda: audit("standard", [], [DOC], KEY, 1.0, evidence=ev(spans=None)),
}


def test_every_outcome_has_a_hand_built_case():
    assert set(CASES) == set(OUTCOMES)


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_hand_built_trace_gets_its_outcome(outcome):
    got = CASES[outcome]()
    assert got["outcome"] == outcome, got


def test_mapreduce_path_facts():
    a = audit("mapreduce", mr_trace(), None, KEY, 1.0)
    assert a["holders"] == [1] and a["map_stated"] == [1] and a["answer_used"] is True
    assert a["outcome"] == "correct"
    # the same trace, the answer scored wrong although it states the value
    assert audit("mapreduce", mr_trace(), None, KEY, 0.0)["outcome"] == "wrong_despite_evidence"
    # a collapse round that keeps the value: the path holds
    kept = {"stage": "collapse", "inputs": [0, 1], "round": 1,
            "output": {"answer": KEY, "no_information": False}}  # fmt: skip
    b = audit("mapreduce", mr_trace(collapse=[kept]), None, KEY, 1.0)
    assert b["collapse_survived"] == [True] and b["outcome"] == "correct"
    # a collapse record that says NO INFORMATION is dropped by collapse: lost there
    gone = {**kept, "output": {"answer": KEY, "no_information": True}}
    assert audit("mapreduce", mr_trace(collapse=[gone]), None, "", 0.0)["outcome"] == (
        "lost_in_collapse"
    )


def test_first_failure_wins():
    # dropped by the floor AND reduce answered wrong: the floor is named, not the reduce
    a = audit(
        "mapreduce",
        mr_trace(map_event(1, HOLDER, KEY, dropped="confidence_floor"), reduce_answer="99"),
        None,
        "99",
        0.0,
    )
    assert a["outcome"] == "filtered_confidence_floor"
    # and a correct answer after a broken path is correct_without_evidence
    b = audit("mapreduce", mr_trace(map_event(1, HOLDER)), None, KEY, 1.0)
    assert b["outcome"] == "correct_without_evidence"


def test_chain_of_agents_carried_to_the_end_is_correct():
    trace = [
        {"stage": "worker", "inputs": [0], "round": 1,
         "output": {"span": list(HOLDER), "memory": f"key {KEY}"}},
        {"stage": "worker", "inputs": [1], "round": 2,
         "output": {"span": [END + 10, len(DOC)], "memory": f"key {KEY}; more"}},
        {"stage": "manager", "inputs": [0, 1], "output": {"memory": f"key {KEY}; more"}},
    ]  # fmt: skip
    a = audit("chain_of_agents", trace, None, KEY, 1.0)
    assert a["holder_steps"] == [1] and a["extracted_at"] == 1 and a["carried_to_end"]
    assert a["outcome"] == "correct"
    trace[0]["output"]["memory"] = "nothing yet"
    assert audit("chain_of_agents", trace, None, "", 0.0)["outcome"] == "not_extracted"


def test_standard_from_kept_spans_when_no_prompt_is_known():
    inside = [{"stage": "generate", "output": {"kept": [[0, END + 5], [len(DOC) - 5, len(DOC)]]}}]
    outside = [{"stage": "generate", "output": {"kept": [[0, START + 3], [END - 2, len(DOC)]]}}]
    assert audit("standard", inside, None, KEY, 1.0)["outcome"] == "correct"
    assert audit("standard", outside, None, "x", 0.0)["outcome"] == "evidence_truncated"
    # an official cut keeps no character spans, and without the prompt nothing is known
    cut = [{"stage": "generate", "output": {"kept": None}}]
    assert audit("standard", cut, None, KEY, 1.0)["outcome"] == "unknown"


def test_unknown_when_nothing_can_tell():
    assert audit("no_such_strategy", [], None, KEY, 1.0)["outcome"] == "unknown"
    # a trace from before chunk spans were recorded
    old = [{"stage": "map", "inputs": [0], "output": {"answer": KEY}}]
    assert audit("mapreduce", old, None, KEY, 1.0)["outcome"] == "unknown"
    # an unanswerable variant: the document holds no evidence
    assert audit("standard", [], [DOC], "", 0.0, evidence=ev(spans=()))["outcome"] == "unknown"


def test_decide_refuses_a_failure_outside_the_vocabulary():
    with pytest.raises(ValueError):
        decide("lost_somewhere", False)


def test_funnel_adds_up_to_n_and_rescoring_moves_lines():
    good = CASES["correct"]()
    trunc = CASES["evidence_truncated"]()
    lines = [
        ({"id": 1, "audit": good, "prediction": KEY}, KEY, 1.0),
        ({"id": 2, "audit": trunc, "prediction": "7"}, "7", 0.0),
        ({"id": 3, "error": "too long", "prediction": ""}, "", 0.0),  # failed: unknown
        ({"id": 4, "prediction": KEY}, KEY, 1.0),  # no audit, no trace: unknown
    ]
    block, changed = audit_task("standard", lines, {})
    assert block["n"] == 4 and sum(block["funnel"].values()) == 4
    assert block["funnel"]["correct"] == 1 and block["funnel"]["evidence_truncated"] == 1
    assert block["funnel"]["unknown"] == 2 and not changed
    assert list(block["funnel"]) == list(OUTCOMES)
    # a rescore that finds line 1 wrong: its path held, so wrong_despite_evidence
    assert outcome_of(good, 0.0) == "wrong_despite_evidence"
    block, changed = audit_task("standard", [(lines[0][0], KEY, 0.0)], {})
    assert changed and lines[0][0]["audit"]["outcome"] == "wrong_despite_evidence"
    with pytest.raises(ValueError):
        funnel(["correct", "nonsense"])


def test_saved_lines_are_audited_from_their_trace():
    line = {
        "id": 9,
        "prediction": KEY,
        "trace": mr_trace(),
        "prompt": None,
    }
    block, changed = audit_task("mapreduce", [(line, KEY, 1.0)], {9: ev()})
    assert changed and line["audit"]["outcome"] == "correct" and block["funnel"]["correct"] == 1
    assert saved_prompts("p") == ["p"] and saved_prompts(["a", "b"]) == ["a", "b"]
    assert saved_prompts([{"role": "user", "content": "x"}]) == [[{"role": "user", "content": "x"}]]


# -- evidence spans and value tests -----------------------------------------------------------


def test_locate_finds_whole_values_only():
    text = "a 4123 b 41234 c 4123."
    assert locate(text, ["4123"]) == [(2, 6), (17, 21)]
    assert locate(text, ["999"]) is None  # not there: unknown, never a guess
    assert answer_strings({"answer": ["x", 5]}) == ["x", "5"]
    assert answer_strings([{"answer": "a b", "type": "extractive"}]) == ["a b"]


def test_states_needs_a_whole_token_run():
    assert states("The key is 4123.", ["4123"]) and not states("41234", ["4123"])
    assert states("THE  Blue car", ["blue car"]) and not states(None, ["x"])


def test_check_spans_refuses_spans_outside_the_context():
    assert check_spans([[0, 3]], "f.jsonl:1", 5) == [[0, 3]]
    for bad in ([[0, 9]], [[3, 1]], "0-3", [[0, True]]):
        with pytest.raises(BadInput, match="f.jsonl:1: evidence"):
            check_spans(bad, "f.jsonl:1", 5)


def test_value_spans_are_those_stating_the_gold_value():
    link = (0, 7)  # "filler." states nothing
    e = ev(spans=(link, (START, END)))
    assert e.value_spans == [(START, END)]
    assert e.held_by(START - 1, START + 1) and not e.held_by(0, 7)
    only_links = ev(spans=(link,))
    assert only_links.value_spans == [link]  # nothing states it: every span counts


def test_kept_spans_of_a_middle_cut():
    doc = "".join(chr(97 + i % 26) for i in range(100))
    cut = doc[:13] + "\n...\n" + doc[60:]
    assert kept_spans(doc, cut) == [[0, 13], [60, 100]]
    assert kept_spans(doc, "") == []
