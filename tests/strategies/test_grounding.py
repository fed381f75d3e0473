"""Grounding: a retrieval finding must come from its chunk (chunkwise.strategies.grounding)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.strategies import Query, get_strategy
from chunkwise.strategies.grounding import (
    cover,
    holds_phrase,
    is_grounded,
    misquotes,
    quote_pieces,
    quoted_phrases,
    snap_answer,
)

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


def _chat_llm(map_reply: Callable[[re.Match], str], reduce_reply: str | Callable) -> ScriptedLLM:
    """A scripted chat model: ``map_reply`` answers each map prompt, ``reduce_reply`` the
    collapse and reduce prompts."""
    llm = ScriptedLLM(
        rules=[
            (r"Part of the document =====.*", map_reply),
            (r"Findings from.*|notes.*", reduce_reply),
        ],
        window=1024,
    )
    llm.chat = True
    return llm


def _llm(finding: str) -> ScriptedLLM:
    def reply(m: re.Match) -> str:
        if "filler3w0" not in m.group(0):
            return "Extracted Information: none\nRationale: r\nAnswer: [NO INFORMATION]"
        return f"Extracted Information: {finding}\nRationale: r\nAnswer: 4711\nConfidence Score: 5"

    return _chat_llm(reply, "Answer: 4711")


def _doc(text: str = "The secret code is 4711.") -> str:
    """Six filler paragraphs (one 70-token part each), ``text`` opening the fourth (part 3)."""
    paras = [" ".join(f"filler{i}w{j}" for j in range(60)) + "." for i in range(6)]
    paras[3] = text + " " + paras[3]
    return "\n\n".join(paras)


@pytest.mark.parametrize(
    ("finding", "task", "on", "dropped"),
    [
        ("The secret code is 4711.", "retrieval", True, 0),  # quoted: kept
        ("The hidden code was 4711 all along.", "retrieval", True, 1),  # made up: dropped
        ("The hidden code was 4711 all along.", "retrieval", False, 0),  # option off
        ("The hidden code was 4711 all along.", "retrieval", None, 0),  # the default: off
        ("The hidden code was 4711 all along.", "qa", True, 0),  # findings need not be quotes
    ],
)
def test_the_strategy_drops_ungrounded_retrieval_findings_when_on(finding, task, on, dropped):
    llm = _llm(finding)
    opts = {} if on is None else {"grounding": on}
    strat = get_strategy("mapreduce", chunk_tokens=70, **opts)
    ans = strat.answer(_doc(), Query("What is the secret code?", task), llm)
    assert ans.stats.extra["map_ungrounded"] == dropped
    assert ans.stats.extra["ungrounded_parts"] == ([3] if dropped else [])
    assert ans.stats.extra["map_no_information"] == 5  # a dropped finding is not NO INFORMATION
    reduce_prompt = llm.calls[-1].prompt[0]["content"]
    assert ("4711" in reduce_prompt.split("Question:")[0]) is (not dropped)


VALUE = "cf7efe84-ed4e-44a4-91f8-248a6fbf770f"
KV_CHUNK = f'"06d919fe-a6bb-4396-beb8-f30c4e3fae87": "{VALUE}", "0d78c559-f14f": "77aa-12"'


@pytest.mark.parametrize(
    ("answer", "snapped"),
    [
        ("c" + VALUE, VALUE),  # a stuttered first character (hf:default-mr, held-out kv)
        ("x" + VALUE[1:], VALUE),  # a wrong first character
        (VALUE + "f", VALUE),  # one character too many at the end
        (VALUE, None),  # an exact copy needs nothing
        ("c" + VALUE[:18] + "zz" + VALUE[20:], None),  # slips inside: not one run of the chunk
        ("77ab-12", None),  # short answers never take an edge snap: one digit is another answer
        ("06d919fe-a6bb-4396-beb8-f30c4e3fae87-extra-tail", None),  # not the length of a word
        (VALUE[1:], VALUE),  # found only inside a longer word: not a copy of a value
    ],
)
def test_snap_takes_the_chunk_value_a_long_answer_nearly_copies(answer, snapped):
    assert snap_answer(answer, KV_CHUNK) == snapped


DIGITS = "Some filler. The sequence of digits is 0025555574. Remember it. More filler, 12 of it."


@pytest.mark.parametrize(
    ("answer", "chunk", "snapped"),
    [
        # a run of one repeated digit written one short (hf:default-mr seed 1, number_string)
        ("002555574", DIGITS, "0025555574"),
        ("00025555574", DIGITS, "0025555574"),  # one too long
        ("0025574", DIGITS, "0025555574"),  # three short
        # found inside the chunk's value, a count slip of its last run: not a copy of a value
        ("40588333", DIGITS.replace("0025555574", "4058833333"), "4058833333"),
        ("00255555", DIGITS, None),  # cut short: no count slip
        ("0025555574", DIGITS, None),  # an exact copy needs nothing
        ("0025555575", DIGITS, None),  # a changed digit is another answer
        ("0026555574", DIGITS, None),  # so is a changed digit inside a run
        ("25574", DIGITS.replace("0025555574", "255574"), None),  # short: never snaps
        # two words of the chunk that the answer could be: which one is not knowable
        ("002555574", DIGITS + " And 0022555574.", None),
    ],
)
def test_snap_takes_the_value_whose_repeated_digit_the_answer_miscounted(answer, chunk, snapped):
    assert snap_answer(answer, chunk) == snapped


def _value_llm(evidence: str, value: str, answer: str, final: str | None = None) -> ScriptedLLM:
    """Map quotes ``evidence`` and answers ``answer`` on the part holding ``value``; reduce
    answers ``final``, or else the first finding's answer."""

    def reply(m: re.Match) -> str:
        if value not in m.group(0):
            return "Extracted Information: none\nRationale: r\nAnswer: [NO INFORMATION]"
        return f"Extracted Information: {evidence}\nRationale: r\nAnswer: {answer}\nConfidence Score: 5"

    def reduce(m: re.Match) -> str:
        found = re.findall(r"Answer: (\S+)", m.group(0))
        if final is not None:
            return f"Rationale: r\nAnswer: {final}"
        return f"Rationale: r\nAnswer: {found[0] if found else '[NO INFORMATION]'}"

    return _chat_llm(reply, reduce)


NUMBER = "The sequence of digits is 0025555574."
SLIPS = {  # (text put in part 3, the value, its evidence, what the map answers)
    "kv stutter": (
        KV_CHUNK, VALUE, f'"06d919fe-a6bb-4396-beb8-f30c4e3fae87": "{VALUE}"', "c" + VALUE
    ),
    "count slip": (NUMBER, "0025555574", NUMBER, "002555574"),
}  # fmt: skip


@pytest.mark.parametrize("slip", sorted(SLIPS))
@pytest.mark.parametrize("snap", [True, False])
def test_the_strategy_snaps_a_slipped_answer_instead_of_dropping_it(snap, slip):
    text, value, evidence, answer = SLIPS[slip]
    llm = _value_llm(evidence, value, answer)
    strat = get_strategy("mapreduce", chunk_tokens=70, grounding=True, snap_quotes=snap)
    ans = strat.answer(_doc(text), Query("What is the value?", "retrieval"), llm)
    extra = ans.stats.extra
    assert (extra["map_snapped"], extra["map_ungrounded"]) == ((1, 0) if snap else (0, 1))
    assert extra["snapped_parts"] == ([3] if snap else [])
    assert (ans.text == value) is snap
    kept = [e for e in ans.trace if e.stage == "map" and not e.output["no_information"]]
    assert kept[0].output["raw"].endswith(f"Answer: {answer}\nConfidence Score: 5")


@pytest.mark.parametrize(
    ("final", "snap", "expected"),
    [
        ("002555574", True, "0025555574"),  # the reduce miscounts the finding's run: snapped
        ("002555574", False, "002555574"),  # option off: the slip is the answer
        ("0025555575", True, "0025555575"),  # a changed digit is another answer: kept as is
        ("[NO INFORMATION]", True, "[NO INFORMATION]"),
    ],
)
def test_the_reduce_answer_snaps_to_the_finding_it_nearly_copies(final, snap, expected):
    llm = _value_llm(NUMBER, "0025555574", "0025555574", final=final)
    strat = get_strategy("mapreduce", chunk_tokens=70, grounding=True, snap_quotes=snap)
    ans = strat.answer(_doc(NUMBER), Query("What is the value?", "retrieval"), llm)
    assert ans.text == expected
    assert ans.stats.extra["reduce_snapped"] is (expected != final)
    assert [e.output["raw"] for e in ans.trace if e.stage == "reduce"] == [
        f"Rationale: r\nAnswer: {final}"
    ]


# -- a phrase the question quotes (anchor_quotes) ---------------------------------------------

PHRASE = "If none of the other commands"
SPAN_Q = f'Which four words come right after "{PHRASE}" in the document?'


def test_only_phrases_of_five_words_or_more_are_anchors():
    assert quoted_phrases(SPAN_Q) == ["if none of the other commands"]
    # curly quotes and a line wrap inside are the same phrase; a key or a name is no anchor
    assert quoted_phrases("After \u201cIf none of the\nother commands\u201d?") == [
        "if none of the other commands"
    ]
    assert quoted_phrases('What is the value of the key "80cdf3f1-18ef-4602"?') == []
    assert quoted_phrases('Who planned "the Red Wedding" and why?') == []
    assert quoted_phrases("What is the pass key?") == []
    # five words are an anchor, four are not
    assert quoted_phrases('After "one two three four five" and "six seven eight nine"?') == [
        "one two three four five"
    ]


@pytest.mark.parametrize(
    ("chunk", "held"),
    [
        ("Text. If none of the other\n   commands match, print.", True),  # across a wrap
        ("IF NONE OF THE OTHER COMMANDS match", True),  # case
        ("other commands match, the interpreter prints.", True),  # a chunk boundary before
        ("Some text ends with: if none of the", True),  # ... and after
        ("mands match, the interpreter prints.", True),  # a token boundary inside a word
        ("Some text ends with: if none of th", True),
        ("f none of the other commands match", True),  # the cut falls in its first word
        ("Some text ends with: if none of the other comm", True),  # ... or in its last
        ("Some text ends with: bathe", False),  # a word that only ends like the phrase's
        ("commandsmatch, then other text", False),  # a word that only starts like it
        ("One of them said so.", False),  # "one" ends "none", but "of them" is not "of the"
        ("Then he said that the", False),  # ends with "the", not with "if none of the"
        ("If none of the commands match, print.", False),  # a word missing is not the phrase
        ("Nothing here mentions it. Other commands exist.", False),
        ("", False),
    ],
)
def test_a_chunk_holds_the_phrase_or_the_piece_a_boundary_leaves(chunk, held):
    assert holds_phrase(chunk, "if none of the other commands") is held


def test_a_finding_that_echoes_the_quoted_phrase_must_come_from_a_chunk_holding_it():
    made_up = f"{PHRASE} are visible, the document will give a"
    assert misquotes(SPAN_Q, made_up, "are visible, the document", "Unrelated text about loops.")
    assert misquotes(SPAN_Q, "no quote here", f"{PHRASE} run", "Unrelated text.")  # the answer
    held = f"Text. {PHRASE} match, nothing is printed."
    assert not misquotes(SPAN_Q, f"{PHRASE} match, nothing is printed", "match, nothing is", held)
    # a finding that does not claim the phrase is not this check's business
    assert not misquotes(SPAN_Q, "Loops run until done.", "until done", "Loops run until done.")
    # nor is a question without an anchor
    assert not misquotes("What follows the phrase?", made_up, "are visible", "Unrelated text.")


def _span_llm() -> ScriptedLLM:
    """Every map call echoes the quoted phrase; only the part that holds it continues it right."""

    def reply(m: re.Match) -> str:
        if PHRASE in m.group(0).split("Question:")[0]:
            return (
                f"Extracted Information: {PHRASE} match, print\nRationale: r\nAnswer: match, print"
            )
        return f"Extracted Information: {PHRASE} are visible\nRationale: r\nAnswer: are visible"

    return _chat_llm(reply, "Answer: x")


@pytest.mark.parametrize("task", ["qa", "retrieval"])
@pytest.mark.parametrize("on", [True, False, None])
def test_the_strategy_drops_findings_that_echo_a_quoted_phrase_their_part_lacks(on, task):
    llm = _span_llm()
    opts = {} if on is None else {"anchor_quotes": on}
    strat = get_strategy("mapreduce", chunk_tokens=70, **opts)
    ans = strat.answer(_doc(f"{PHRASE} match, print."), Query(SPAN_Q, task), llm)
    extra = ans.stats.extra
    dropped = [0, 1, 2, 4, 5] if on else []  # the default is off
    assert (extra["map_misquoted"], extra["misquoted_parts"]) == (len(dropped), dropped)
    notes = llm.calls[-1].prompt[0]["content"].split("Question:")[0]
    assert "match, print" in notes
    assert ("are visible" in notes) is (not on)
