from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunkwise.strategies.protocol import (
    NO_INFO,
    Record,
    parse_confidence,
    parse_record,
    render_record,
)


def test_clean_four_fields():
    r = parse_record(
        "Extracted Information: Jerry is 18.\nRationale: stated.\nAnswer: 18\nConfidence Score: 5"
    )
    assert (r.extracted_information, r.rationale, r.answer, r.confidence) == (
        "Jerry is 18.",
        "stated.",
        "18",
        5.0,
    )
    assert not r.no_information


def test_reordered_bold_and_extra_text():
    text = (
        "Sure! Here is my analysis.\n**Answer:** Paris\n**Confidence Score:** 4/5\n"
        "### Rationale: the text names the capital\n1. Extracted Information: capital is Paris\n"
        "Hope this helps."
    )
    r = parse_record(text)
    assert r.answer == "Paris"
    assert r.confidence == 4.0
    assert r.rationale.startswith("the text names the capital")
    assert r.extracted_information.startswith("capital is Paris")


@pytest.mark.parametrize(
    "text,expected",
    [
        ("4/5", 4.0),
        ("4.5", 4.5),
        ("3 out of 5", 3.0),
        ("8/10", 4.0),
        ("high", 4.0),
        ("very low", 0.5),
        ("medium", 2.5),
        ("", None),
        ("n/a", None),
        (None, None),
        ("7", 5.0),
        ("Based on 2 of the 3 facts, 4", 4.0),
        ("3 facts support it, so 4", 4.0),
        ("4 because 2 facts agree", 4.0),
        ("4.5 as stated", 4.5),
        ("very high", 5.0),
        ("moderate", 2.5),
        ("low", 1.0),
        ("none", 0.0),
        ("1/1", 5.0),
        ("3/0", 3.0),
        ("12/10", 5.0),
        ("0/5", 0.0),
        ("0", 0.0),
        ("-2", 0.0),
    ],
)
def test_confidence_forms(text, expected):
    assert parse_confidence(text) == expected


@pytest.mark.parametrize(
    "header",
    [
        "Confidence Score (0-5)",
        "Confidence (out of 5)",
        "Confidence level",
        "**Confidence Score (0–5):**",
        "Confidence rating",
    ],
)
def test_confidence_header_variants_are_fields_not_answer_text(header):
    sep = "" if header.endswith(":**") else ":"
    r = parse_record(f"Extracted Information: x\nAnswer: 42\n{header}{sep} 4")
    assert r.answer == "42"
    assert r.confidence == 4.0


def test_record_without_answer_renders_as_missing_not_no_information():
    r = parse_record("Extracted Information: code 4711\nRationale: stated")
    assert r.answer is None and not r.no_information
    assert "Answer: (no answer given)" in render_record(r)
    r.truncated = True
    assert "Answer: (cut off before an answer)" in render_record(r)
    said = parse_record("Extracted Information: nothing\nRationale: [NO INFORMATION]")
    assert said.no_information and f"Answer: {NO_INFO}" in render_record(said)


@pytest.mark.parametrize(
    "answer", [NO_INFO, "NO INFORMATION", "**[No Information]**", "no relevant information.", ""]
)
def test_no_information_in_answer_field(answer):
    r = parse_record(
        f"Extracted Information: -\nRationale: -\nAnswer: {answer}\nConfidence Score: 0"
    )
    assert r.no_information


def test_marker_elsewhere_does_not_drop_a_real_answer():
    r = parse_record(f"Extracted Information: {NO_INFO} is quoted\nAnswer: 42\nConfidence Score: 3")
    assert not r.no_information and r.answer == "42"


def test_missing_fields_and_answer_only_mode():
    r = parse_record("just some notes")
    assert r.answer is None and r.extracted_information == "just some notes"
    assert not r.no_information
    r = parse_record(" 71432.", answer_only=True)
    assert r.answer == "71432." and not r.no_information
    assert parse_record("NO INFORMATION", answer_only=True).no_information


def test_chinese_fields():
    r = parse_record("提取的信息：北京是首都\n分析：文中直接说明\n答案：北京\n置信度分数：5")
    assert (r.answer, r.confidence, r.rationale) == ("北京", 5.0, "文中直接说明")


def test_record_dict_round_trip():
    rec = Record("facts", "because", "B", 3.5, sources=[2, 3], truncated=True)
    assert not Record().no_information and Record().answer is None
    assert Record.from_dict(rec.to_dict()) == rec
    assert Record.from_dict({"answer": "x", "unknown_key": 1}) == Record(answer="x")


def test_render_round_trip():
    rec = Record("facts", "because", "B", 3.5)
    back = parse_record(render_record(rec))
    assert (back.extracted_information, back.rationale, back.answer, back.confidence) == (
        "facts",
        "because",
        "B",
        3.5,
    )


FIELD = st.sampled_from(
    [
        "Extracted Information",
        "Rationale",
        "Answer",
        "Confidence Score",
        "**Answer**",
        "answer",
        "Confidence",
        "Reasoning",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(FIELD, st.text(max_size=40)), max_size=6),
    st.text(max_size=80),
    st.booleans(),
)
def test_parser_never_raises(fields, noise, answer_only):
    text = noise + "\n" + "\n".join(f"{k}: {v}" for k, v in fields)
    r = parse_record(text, answer_only=answer_only)
    assert r.raw == text
    assert r.confidence is None or 0.0 <= r.confidence <= 5.0
    assert isinstance(r.no_information, bool)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_parser_total_on_arbitrary_text(text):
    parse_record(text)
    parse_record(text, answer_only=True)
    parse_confidence(text)


def test_a_reply_that_runs_on_into_the_next_part_keeps_only_its_own_record():
    """hf:default-mr under confidence=off (no score line to end on) wrote its record, then a
    part delimiter and a second record; the answer must not swallow them (it did, and the
    grounding check then dropped the finding)."""
    raw = (
        "Extracted Information: The access code of the clinic is 1972.\n"
        "Rationale: This part states it directly.\nAnswer: 1972\n"
        "===== Part 1. Extracted Information: Nothing in this part bears on the question.\n"
        "Rationale: The question asks about an access code.\nAnswer: [NO INFORMATION]"
    )
    r = parse_record(raw)
    assert (r.extracted_information, r.answer, r.no_information) == (
        "The access code of the clinic is 1972.",
        "1972",
        False,
    )
    assert r.rationale == "This part states it directly." and r.raw == raw
    # a second record with no delimiter: it starts where a field comes round again
    # (the first gave no score: the second's is not its)
    r = parse_record(
        "Extracted Information: A\nRationale: B\nAnswer: 5\n"
        "Extracted Information: C\nRationale: D\nAnswer: 6\nConfidence Score: 1"
    )
    assert (r.extracted_information, r.rationale, r.answer, r.confidence) == ("A", "B", "5", None)
    # an empty field given again at once is still filled by its second line
    assert parse_record("Answer:\nAnswer: 7").answer == "7"
