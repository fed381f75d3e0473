"""A chat reply stops at its turn's end marker, even on a base model whose generation_config
lists only ``<eos>`` (the embedded Gemma under its chat template, as ``hf:default-mr`` runs)."""

from __future__ import annotations

import pytest

from chunkwise.llm.hf import HFLLM
from chunkwise.llm.turns import end_of_turn_ids

GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}"
    "<end_of_turn>\n{% endfor %}<start_of_turn>model\n"
)


@pytest.fixture(scope="module")
def gemma(embedded_llm):
    return embedded_llm.model, embedded_llm.tokenizer


def test_marker_ids_come_from_the_template_and_the_vocabulary(gemma):
    _, tok = gemma
    eot = tok.convert_tokens_to_ids("<end_of_turn>")
    old = tok.chat_template
    try:
        tok.chat_template = GEMMA_TEMPLATE
        assert end_of_turn_ids(tok) == [eot]
        tok.chat_template = None  # no template, no turns
        assert end_of_turn_ids(tok) == []
    finally:
        tok.chat_template = old


def test_chat_mode_ends_generation_at_end_of_turn_and_plain_mode_does_not(gemma):
    """HF generate stops on every id in ``eos_ids``."""
    model, tok = gemma
    old = tok.chat_template
    try:
        tok.chat_template = GEMMA_TEMPLATE
        eot = tok.convert_tokens_to_ids("<end_of_turn>")
        eos = tok.eos_token_id
        chat = HFLLM(model, tok, window=2048, chat=True)
        plain = HFLLM(model, tok, window=2048, chat=False)
    finally:
        tok.chat_template = old
    assert eot in chat.eos_ids and eot not in plain.eos_ids and eos in plain.eos_ids
