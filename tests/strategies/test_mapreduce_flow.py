"""MapReduce control flow with the scripted double (fast, deterministic)."""

from __future__ import annotations

import logging
import re

import pytest

from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.strategies import Query, get_strategy
from chunkwise.strategies.mapreduce import NO_RELEVANT, CollapseError, to_intermediate

NOINFO = "Extracted Information: nothing here\nRationale: unrelated\nAnswer: [NO INFORMATION]\nConfidence Score: 0"


def doc_with(n_paras: int, needle_at: int | None = None, words: int = 60) -> str:
    paras = []
    for i in range(n_paras):
        body = " ".join(f"filler{i}w{j}" for j in range(words)) + "."
        if i == needle_at:
            body = "The secret code is 4711. " + body
        paras.append(body)
    return "\n\n".join(paras)


def chat_llm(rules, window=1024, default=NOINFO):
    llm = ScriptedLLM(rules=rules, default=default, window=window)
    llm.chat = True
    return llm


def stage_of(req) -> str:
    text = req.prompt[0]["content"] if isinstance(req.prompt, list) else req.prompt
    if "Part of the document" in text:
        return "map"
    if "Merge the findings" in text:
        return "collapse"
    return "reduce"


def test_needle_found_and_no_info_dropped():
    llm = chat_llm(
        [
            (
                r"Part of the document =====\n(?:(?!=====).)*secret code is 4711",
                "Extracted Information: the code is 4711\nRationale: stated\nAnswer: 4711\nConfidence Score: 5",
            ),
            (
                r"Findings from part (\d+):\n(?:[^\n]*\n)*?Answer: (\S+)",
                r"Rationale: part \1 says so\nAnswer: \2",
            ),
        ]
    )
    ans = get_strategy("mapreduce").answer(
        doc_with(12, needle_at=7), Query("What is the code?"), llm
    )
    assert ans.text == "4711"
    stages = [stage_of(r) for r in llm.calls]
    assert stages.count("reduce") == 1 and stages[-1] == "reduce"
    n_chunks = ans.stats.extra["chunks"]
    assert n_chunks >= 3 and stages.count("map") == n_chunks
    assert ans.stats.extra["map_no_information"] == n_chunks - 1
    assert ans.stats.llm_calls == len(llm.calls)
    m = to_intermediate(ans)
    assert len(m["map"]) == n_chunks and m["collapse"] == []
    assert [r["answer"] for r in m["map"] if not r["no_information"]] == ["4711"]


def test_all_chunks_no_information_reduce_still_runs_on_explicit_context():
    llm = chat_llm([(r"Findings|No part", "Rationale: nothing found\nAnswer: unknown")])
    ans = get_strategy("mapreduce").answer(doc_with(8), Query("What is the code?"), llm)
    reduce_prompt = llm.calls[-1].prompt[0]["content"]
    assert NO_RELEVANT in reduce_prompt
    assert ans.text == "unknown"
    assert ans.stats.extra["map_no_information"] == ans.stats.extra["chunks"]


def test_early_stop_cuts_generation_at_no_information_answer():
    llm = chat_llm([], default=NOINFO + "\nand a lot of extra words " * 20)
    ans = get_strategy("mapreduce").answer(doc_with(6), Query("What is the code?"), llm)
    n = ans.stats.extra["chunks"]
    assert ans.stats.extra["early_stops"] == n
    map_events = [e for e in ans.trace if e.stage == "map"]
    assert all(e.output["no_information"] for e in map_events)
    assert all("extra words" not in e.output["raw"] for e in map_events)
    no_stop = get_strategy("mapreduce", early_stop=False).answer(doc_with(6), Query("code?"), llm)
    saved = sum(e.completion_tokens for e in no_stop.trace if e.stage == "map") - sum(
        e.completion_tokens for e in map_events
    )
    assert saved > 0


def test_filter_looks_at_the_answer_field_only():
    reply = (
        "Extracted Information: unlike [NO INFORMATION] elsewhere, code 4711\n"
        "Rationale: the marker above is quoted text\nAnswer: 4711\nConfidence Score: 4"
    )
    llm = chat_llm([(r"Part of the document", reply), (r"Findings", "Answer: 4711")])
    ans = get_strategy("mapreduce").answer(doc_with(4), Query("What is the code?"), llm)
    assert ans.stats.extra["map_no_information"] == 0


def long_finding(m: re.Match) -> str:
    return (
        "Extracted Information: " + "detail " * 60 + "\nRationale: r\nAnswer: 4711\n"
        "Confidence Score: 3"
    )


def test_multi_round_collapse_groups_consecutive_records():
    # Every map record is long, so they cannot all reach reduce; collapse outputs are short.
    llm = chat_llm(
        [
            (r"Part of the document", long_finding),
            (
                r"Merge the findings",
                "Extracted Information: " + "merged " * 40 + "\nAnswer: 4711\nConfidence Score: 4",
            ),
            (r"Findings from", "Answer: 4711"),
        ],
        window=1100,
    )
    ans = get_strategy("mapreduce").answer(doc_with(400, words=40), Query("What is the code?"), llm)
    assert ans.text == "4711"
    rounds = ans.stats.extra["collapse_rounds"]
    assert rounds >= 2
    coll = [e for e in ans.trace if e.stage == "collapse"]
    assert coll
    for e in coll:  # each group covers consecutive chunks
        assert e.inputs == list(range(e.inputs[0], e.inputs[-1] + 1))
    m = to_intermediate(ans)
    assert len(m["collapse"]) == rounds
    covered = sorted(i for r in m["collapse"][0] for i in r["sources"])
    assert covered == list(range(ans.stats.extra["chunks"]))


def test_collapse_bound_raises_clear_error():
    endless = "Extracted Information: " + "detail " * 600  # cut at max_new_tokens: never shrinks
    llm = chat_llm(
        [
            (r"Part of the document", long_finding),
            (r"Merge the findings", endless),
        ],
        window=1100,
    )
    with pytest.raises(CollapseError, match="collapse rounds"):
        get_strategy("mapreduce", max_collapse_rounds=2).answer(
            doc_with(400, words=40), Query("What is the code?"), llm
        )


def test_oversized_record_is_truncated_with_warning(caplog):
    huge = "Extracted Information: " + "x " * 2000 + "\nAnswer: 4711\nConfidence Score: 4"
    llm = chat_llm(
        [
            (r"Part of the document", lambda m: huge),
            (r"Merge the findings", "Extracted Information: m\nAnswer: 4711\nConfidence Score: 4"),
            (r"Findings from", "Answer: 4711"),
        ],
        window=1100,
    )
    with caplog.at_level(logging.WARNING):
        ans = get_strategy("mapreduce", max_collapse_rounds=3).answer(
            doc_with(40, words=30), Query("What is the code?"), llm
        )
    assert ans.text == "4711"
    assert any("truncating" in r.message for r in caplog.records)


def test_reduce_sees_confidence_and_calibration_switch():
    llm = chat_llm(
        [(r"Part of the document", "Answer: 1\nConfidence Score: 4/5"), (r"Findings", "Answer: 1")]
    )
    get_strategy("mapreduce").answer(doc_with(3), Query("q?"), llm)
    map_prompt = llm.calls[0].prompt[0]["content"]
    assert "Maria" in map_prompt  # the worked calibration example
    assert "Confidence Score: 4" in llm.calls[-1].prompt[0]["content"]
    llm.calls.clear()
    get_strategy("mapreduce", calibration=False).answer(doc_with(3), Query("q?"), llm)
    assert "Maria" not in llm.calls[0].prompt[0]["content"]
    assert "Confidence Score" not in llm.calls[-1].prompt[0]["content"].split("Question:")[0]


def test_plain_protocol_ablation_uses_free_text_notes():
    llm = chat_llm([(r"Write short notes", "The code is 4711."), (r"Using the notes", "4711")])
    ans = get_strategy("mapreduce", protocol="plain").answer(doc_with(3), Query("code?"), llm)
    assert ans.text == "4711"
    assert "The code is 4711." in llm.calls[-1].prompt[0]["content"]


def test_base_prompts_for_base_models_and_logprob_confidence_absent():
    llm = ScriptedLLM(
        rules=[
            (r"secret code is 4711(?:(?!Question:).)*Question", "4711"),
            (r"Part \d+ of the text says: 4711", "4711"),
        ],
        default="NO INFORMATION",
    )
    ans = get_strategy("mapreduce").answer(
        doc_with(10, needle_at=3), Query("What is the code?"), llm
    )
    assert ans.text == "4711"
    assert ans.stats.extra["prompt_kind"] == "base"
    assert all(isinstance(r.prompt, str) for r in llm.calls)
    assert llm.calls[-1].prompt.split(" of the text says: ")[1].startswith("4711")


def test_bad_options_are_clear():
    from chunkwise.errors import BadInput

    with pytest.raises(BadInput, match="valid: structured, plain"):
        get_strategy("mapreduce", protocol="json")
    with pytest.raises(BadInput, match="no option 'chunks'"):
        get_strategy("mapreduce", chunks=3)
    with pytest.raises(BadInput, match="unknown strategy"):
        get_strategy("nope")
