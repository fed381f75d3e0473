"""The embedded model's conversion: its tokenizer puts <bos> first whatever transformers made
it (5.19's GGUF conversion, in `make vllm`'s environment, left it out, and Gemma without
<bos> writes nonsense), and a conversion made before that check is redone."""

from __future__ import annotations

import json

import pytest

from chunkwise.llm import embedded


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(embedded.converted_dir()))


def test_the_cached_tokenizer_puts_bos_first(tokenizer):
    assert tokenizer("The pass key is")["input_ids"][0] == tokenizer.bos_token_id == 2


def test_ensure_bos_restores_a_post_processor_that_adds_nothing(tokenizer):
    from tokenizers.processors import TemplateProcessing

    backend = tokenizer.backend_tokenizer
    kept = backend.post_processor
    try:
        backend.post_processor = TemplateProcessing(single="$A", pair="$A $B:1")
        if hasattr(tokenizer, "add_bos_token"):
            tokenizer.add_bos_token = False
        assert tokenizer("a")["input_ids"][0] != 2  # what transformers 5.19 left
        embedded.ensure_bos(tokenizer)
        assert tokenizer("a")["input_ids"][0] == 2
        assert tokenizer("a", "b")["input_ids"].count(2) == 2
    finally:
        backend.post_processor = kept


def test_a_conversion_from_before_the_check_is_redone(tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    assert not embedded._current(out)  # nothing converted
    (out / embedded._MARKER).write_text(json.dumps({"source": "x", "hub_id": "y"}))
    assert not embedded._current(out)  # format 1: made before the <bos> check
    (out / embedded._MARKER).write_text(json.dumps({"format": embedded.CONVERSION_FORMAT}))
    assert embedded._current(out)
    (out / embedded._MARKER).write_text("{cut")
    assert not embedded._current(out)
