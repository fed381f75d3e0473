"""Grounding: a retrieval finding must come from its chunk (chunkwise.strategies.grounding)."""

from __future__ import annotations

import re

import pytest

from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.strategies import Query, get_strategy
from chunkwise.strategies.grounding import cover, is_grounded, quote_pieces

CHUNK = (
    'Some filler text. "9a1c-77": "b3f0-12", "4e02-55": "c9d1-88". '
    "The access code of the orchard is 5158. More filler follows here."
)


def test_a_quote_with_its_value_is_grounded_and_a_made_up_one_is_not():
    assert is_grounded("The access code of the orchard is 5158.", "5158", CHUNK)
    # a misquoted article is still the chunk's sentence
    assert is_grounded("An access code of the orchard is 5158.", "5158", CHUNK)
    # the question's key glued to another key's value: the value is in the chunk, the pair not
    assert not is_grounded('"9a1c-77": "c9d1-88"', "c9d1-88", CHUNK)
    assert is_grounded('"9a1c-77": "b3f0-12"', "b3f0-12", CHUNK)
    # a value the chunk never states, in a sentence shaped like one it does
    assert not is_grounded("The access code of the orchard is 55.", "55", "nothing about codes")
    assert not is_grounded("The access code of the orchard is 5158.", "4711", CHUNK)
    # no answer is no value copied
    assert not is_grounded("The access code of the orchard is 5158.", None, CHUNK)


def test_pieces_split_sentences_and_clauses_and_skip_scraps():
    pieces = quote_pieces('An early memo said 6451; the memo was withdrawn. "Yes."\nIt is.')
    assert pieces == ["an early memo said 6451", "the memo was withdrawn"]
    assert cover("abcdefghij", "xxabcdefghyy") == pytest.approx(0.8)


def _llm(finding: str) -> ScriptedLLM:
    def reply(m: re.Match) -> str:
        if "filler3w0" not in m.group(0):
            return "Extracted Information: none\nRationale: r\nAnswer: [NO INFORMATION]"
        return f"Extracted Information: {finding}\nRationale: r\nAnswer: 4711\nConfidence Score: 5"

    llm = ScriptedLLM(
        rules=[(r"Part of the document =====.*", reply), (r"Findings from|notes", "Answer: 4711")],
        window=1024,
    )
    llm.chat = True
    return llm


def _doc() -> str:
    paras = [" ".join(f"filler{i}w{j}" for j in range(60)) + "." for i in range(6)]
    paras[3] = "The secret code is 4711. " + paras[3]
    return "\n\n".join(paras)


@pytest.mark.parametrize(
    ("finding", "task", "on", "dropped"),
    [
        ("The secret code is 4711.", "retrieval", True, 0),  # quoted: kept
        ("The hidden code was 4711 all along.", "retrieval", True, 1),  # made up: dropped
        ("The hidden code was 4711 all along.", "retrieval", False, 0),  # option off
        ("The hidden code was 4711 all along.", "qa", True, 0),  # findings need not be quotes
    ],
)
def test_the_strategy_drops_ungrounded_retrieval_findings_when_on(finding, task, on, dropped):
    llm = _llm(finding)
    strat = get_strategy("mapreduce", chunk_tokens=70, grounding=on)
    ans = strat.answer(_doc(), Query("What is the secret code?", task), llm)
    assert ans.stats.extra["map_ungrounded"] == dropped
    assert ans.stats.extra["ungrounded_parts"] == ([3] if dropped else [])
    assert ans.stats.extra["map_no_information"] == 5  # a dropped finding is not NO INFORMATION
    reduce_prompt = llm.calls[-1].prompt[0]["content"]
    assert ("4711" in reduce_prompt.split("Question:")[0]) is (not dropped)
