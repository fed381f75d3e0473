"""The CPU output head computed as ``(W @ x.T).T``: installed on fp32 CPU models only, the
same logits as ``linear`` to rounding, and the same greedy outputs on the embedded model."""

from __future__ import annotations

import pytest

from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.llm.output_head import MAX_ROWS, fast_output_head


def _head_is_fast(model) -> bool:
    return "forward" in vars(model.get_output_embeddings())


def test_logits_match_linear_for_few_and_many_rows(tiny_llama):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_llama, dtype=torch.float32)
    head = model.get_output_embeddings()
    head.bias = torch.nn.Parameter(torch.randn(head.out_features))
    assert fast_output_head(model) and _head_is_fast(model)
    for shape in [(1, 1, 32), (3, 1, 32), (2, 5, 32), (1, MAX_ROWS + 1, 32)]:
        x = torch.randn(*shape)
        want = torch.nn.functional.linear(x, head.weight, head.bias)
        got = head(x)
        assert got.shape == want.shape and got.is_contiguous()
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_bf16_and_wrapped_heads_are_left_alone(tiny_llama):
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_llama, dtype=torch.bfloat16)
    assert not fast_output_head(model) and not _head_is_fast(model)
    model = AutoModelForCausalLM.from_pretrained(tiny_llama, dtype=torch.float32)
    model.lm_head = torch.nn.Sequential(model.lm_head)  # not a plain Linear
    assert not fast_output_head(model)


def test_spec_option_turns_it_off(tiny_llama):
    with load_llm(f"hf:{tiny_llama}") as fast, load_llm(f"hf:{tiny_llama}?fast_head=0") as plain:
        assert _head_is_fast(fast.model) and not _head_is_fast(plain.model)
        p = GenerationParams(max_new_tokens=8)
        prompts = ["hello world", "a b c", "the cat sat"]
        assert [c.text for c in fast.generate([Request(x, p) for x in prompts])] == [
            c.text for c in plain.generate([Request(x, p) for x in prompts])
        ]


@pytest.mark.slow
def test_embedded_model_greedy_outputs_unchanged(embedded_llm):
    prompts = [
        "The capital of France is",
        "1, 2, 3, 4,",
        "Here is a short story about a dog named Rex. One day, Rex",
        "The pass key is 52817. Remember it. What is the pass key? The pass key is",
    ]
    p = GenerationParams(max_new_tokens=24)
    head = embedded_llm.model.get_output_embeddings()
    assert _head_is_fast(embedded_llm.model)  # hf:default on CPU gets it
    fast = embedded_llm.generate([Request(x, p) for x in prompts])
    fast_forward = head.forward
    del head.forward  # back to torch's linear
    try:
        plain = embedded_llm.generate([Request(x, p) for x in prompts])
    finally:
        head.forward = fast_forward
    assert [c.text for c in fast] == [c.text for c in plain]
    assert all(c.completion_tokens == 24 or c.finish_reason == "stop" for c in fast)


def test_a_bad_option_value_names_the_spec(tiny_llama):
    from chunkwise.errors import BadInput

    with pytest.raises(BadInput, match="fast_head='maybe' is not valid; expected true or false"):
        load_llm(f"hf:{tiny_llama}?fast_head=maybe")
    with pytest.raises(BadInput, match=r"unknown option\(s\) fast_haed \(did you mean 'fast_head'"):
        load_llm(f"hf:{tiny_llama}?fast_haed=0")
