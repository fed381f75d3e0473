"""bench/decision_probe.py: where a map target's finding and "Nothing ..." part ways."""

from __future__ import annotations

import pytest

from bench_loader import load_bench


@pytest.fixture(scope="module")
def tok():
    from chunkwise.llm.default_mr import counting_llm

    return counting_llm().tokenizer


@pytest.mark.parametrize(
    ("target", "first"),
    [
        ('Extracted Information: "k1": "v1"\nRationale: This part states it directly.', '"'),
        ("Extracted Information: Nothing in this part bears on the question.", "Nothing"),
    ],
)
def test_decision_index_is_the_first_token_after_the_header(tok, target, first):
    prompt = tok.encode("Question: which value?\n", add_special_tokens=False)
    ids = tok.encode(target, add_special_tokens=False)
    labels = [-100] * len(prompt) + ids
    at = load_bench("decision_probe").decision_index(tok, labels)
    assert tok.decode([labels[at]]).strip() == first


def test_decision_index_needs_the_header(tok):
    labels = [-100, -100, *tok.encode("Answer: 5", add_special_tokens=False)]
    with pytest.raises(ValueError, match="Extracted Information"):
        load_bench("decision_probe").decision_index(tok, labels)
