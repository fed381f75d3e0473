"""The token that ends a chat model's turn, so decoding stops there.

A chat template closes every assistant turn with a marker (Gemma ``<end_of_turn>``, Llama 3
``<|eot_id|>``, ChatML ``<|im_end|>``, Phi ``<|end|>``). Instruction-tuned checkpoints list it
in ``generation_config.eos_token_id``; a base model given a chat template (the embedded
Gemma-3-270M under ``hf:default-mr``) lists only ``<eos>``, so without this a reply runs on past
its turn into a made-up next one until ``max_new_tokens``.
"""

from __future__ import annotations

from typing import Any

#: turn-closing markers of common chat templates
END_OF_TURN_MARKERS = ("<end_of_turn>", "<|eot_id|>", "<|im_end|>", "<|end|>")


def end_of_turn_ids(tokenizer: Any) -> list[int]:
    """Ids of the markers that the tokenizer's chat template uses and its vocabulary holds as
    single tokens (empty without a template)."""
    template = getattr(tokenizer, "chat_template", None) or ""
    if not isinstance(template, str):  # a dict of named templates
        template = " ".join(str(t) for t in dict(template).values())
    markers = [m for m in END_OF_TURN_MARKERS if m in template]
    if not markers:
        return []
    vocab = tokenizer.get_vocab()
    return [vocab[m] for m in markers if m in vocab]
