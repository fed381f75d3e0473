"""bench/decision_probe.py: where a map target's finding and the empty record part ways."""

from __future__ import annotations

import pytest

from bench_loader import load_bench

EMPTY = "Extracted Information: Nothing in this part bears on the question."
KEY = "80cdf3f1-18ef-4602-87c6-61080750f6eb"


@pytest.fixture(scope="module")
def tok():
    from chunkwise.llm.default_mr import counting_llm

    return counting_llm().tokenizer


def _labels(tok, target: str, prompt: str = "Question: which value?\n") -> list[int]:
    head = tok.encode(prompt, add_special_tokens=False)
    return [-100] * len(head) + tok.encode(target, add_special_tokens=False)


@pytest.mark.parametrize(
    ("target", "contrast", "token"),
    [
        ('Extracted Information: "k1": "v1"\nRationale: This part states it directly.', EMPTY, '"'),
        (EMPTY, 'Extracted Information: "k1": "v1"', "Nothing"),
        # kv_retrieval's empty record restates the key: the decision comes after it
        (
            f'Extracted Information: "{KEY}": "17a1aa2b"',
            f'Extracted Information: "{KEY}": not',
            '"',
        ),
        (
            f'Extracted Information: "{KEY}": not in this part.',
            f'Extracted Information: "{KEY}": "1',
            "not",
        ),
    ],
)
def test_decision_index_is_where_the_two_targets_part_ways(tok, target, contrast, token):
    labels = _labels(tok, target)
    # the contrast's prompt is longer: only the targets are aligned
    other = _labels(tok, contrast, prompt="Question: which value is it?\nPart 2 of 9.\n")
    at = load_bench("decision_probe").decision_index(labels, other)
    assert tok.decode([labels[at]]).strip() == token
    assert labels[at - 1] != -100  # inside the target, past its shared prefix


def test_decision_index_needs_targets_that_part_ways(tok):
    labels = _labels(tok, "Answer: 5")
    with pytest.raises(ValueError, match="part ways"):
        load_bench("decision_probe").decision_index(labels, _labels(tok, "Answer: 5 and more"))
