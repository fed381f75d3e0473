"""bench/decision_probe.py: where a map target's finding and "Nothing ..." part ways."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "decision_probe", ROOT / "bench" / "decision_probe.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
    at = _bench().decision_index(tok, labels)
    assert tok.decode([labels[at]]).strip() == first


def test_decision_index_needs_the_header(tok):
    labels = [-100, -100, *tok.encode("Answer: 5", add_special_tokens=False)]
    with pytest.raises(ValueError, match="Extracted Information"):
        _bench().decision_index(tok, labels)
