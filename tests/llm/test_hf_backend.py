"""The transformers backend: tiny random Llama models built in-process, and the embedded model."""

from __future__ import annotations

import pytest

from chunkwise.llm import GenerationParams, Request, load_llm

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}</s>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def test_tiny_model_loads_from_folder_and_generates(tiny_llama):
    llm = load_llm(f"hf:{tiny_llama}?ctx=256")
    assert llm.context_window == 256 and llm.chat is False
    out = llm.generate([Request("The sky is", GenerationParams(max_new_tokens=6))])
    assert out[0].completion_tokens <= 6 and out[0].prompt_tokens > 0
    assert llm.count_tokens("The sky is blue.") == len(llm.encode("The sky is blue."))


def test_chat_template_used_when_present(tiny_llama, tmp_path):
    import shutil

    from transformers import AutoTokenizer

    shutil.copytree(tiny_llama, tmp_path / "m")
    tok = AutoTokenizer.from_pretrained(tmp_path / "m")
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(tmp_path / "m")
    llm = load_llm(f"hf:{tmp_path / 'm'}")
    assert llm.chat is True
    text, _ = llm.render([{"role": "user", "content": "hi"}])
    assert text == "<|user|>hi</s><|assistant|>"
    assert llm.continues_replies
    text, _ = llm.render(llm.continue_reply([{"role": "user", "content": "hi"}], "Answer:"))
    assert text == "<|user|>hi</s><|assistant|>Answer:"  # the reply goes on: no </s>
    assert load_llm(f"hf:{tmp_path / 'm'}?chat=off").chat is False


def test_lora_adapter_by_spec_and_by_folder(tiny_llama, tmp_path, save_random_lora):
    adapter = save_random_lora(tiny_llama, tmp_path / "adapter")

    prompt = [Request("The sky is", GenerationParams(max_new_tokens=8))]
    plain = load_llm(f"hf:{tiny_llama}").generate(prompt)[0].text
    by_spec = load_llm(f"hf:{tiny_llama}+adapter={adapter}").generate(prompt)[0].text
    by_folder = load_llm(str(adapter)).generate(prompt)[0].text
    assert by_spec == by_folder
    assert by_spec != plain


def test_missing_adapter_config_is_clear(tiny_llama, tmp_path):
    from chunkwise.errors import BadInput

    with pytest.raises(BadInput, match="adapter_config.json"):
        load_llm(f"hf:{tiny_llama}+adapter={tmp_path}")


@pytest.mark.slow
def test_embedded_model_generates_and_batches_match(embedded_llm):
    prompts = [
        "The capital of France is",
        "1, 2, 3, 4,",
        "Here is a short story about a dog named Rex. One day, Rex",
        "The pass key is 52817. Remember it. What is the pass key? The pass key is",
    ]
    p = GenerationParams(max_new_tokens=10)
    batched = embedded_llm.generate([Request(x, p) for x in prompts])
    single = [embedded_llm.generate([Request(x, p)])[0] for x in prompts]
    assert [c.text for c in batched] == [c.text for c in single]
    assert "52817" in batched[3].text
    assert all(c.completion_tokens > 0 for c in batched)


@pytest.mark.slow
def test_embedded_stop_strings_and_logprobs(embedded_llm):
    c = embedded_llm.complete("1, 2, 3, 4, 5,", max_new_tokens=20, stop=("8",), logprobs=True)
    assert "8" not in c.text and c.finish_reason == "stop"
    assert c.token_logprobs is not None and len(c.token_logprobs) == c.completion_tokens
    assert "".join(c.tokens).startswith(c.text)
    assert all(lp <= 0 for lp in c.token_logprobs)
    p = c.mean_token_prob()
    assert p is not None and 0 < p <= 1


@pytest.mark.slow
def test_chunked_prefill_gives_the_same_greedy_output(embedded_llm):
    noise = "The grass is green. The sky is blue. The sun is yellow. Here we go.\n"
    prompt = noise * 60 + "The pass key is 40417. Remember it.\n" + noise * 60 + "The pass key is"
    p = GenerationParams(max_new_tokens=6)
    saved = embedded_llm.prefill_chunk
    try:
        embedded_llm.prefill_chunk = 0
        whole = embedded_llm.generate([Request(prompt, p)])[0]
        embedded_llm.prefill_chunk = 512
        chunked = embedded_llm.generate([Request(prompt, p)])[0]
    finally:
        embedded_llm.prefill_chunk = saved
    assert whole.prompt_tokens > 2 * 512
    assert chunked.text == whole.text
    assert "40417" in chunked.text


def test_a_continued_reply_is_the_new_turn_plus_the_partial_reply(gemma_tokenizer):
    """What a follow-up sends (``continue_reply``) is exactly what decoding the whole reply
    would have seen at that point, under the template hf:default-mr was trained with."""
    from chunkwise.llm.base import template_kwargs
    from chunkwise.prompts import load_text

    template = load_text("mapreduce/gemma_chat.jinja")
    user = [{"role": "user", "content": "Part of the document ... What is the pass key?"}]
    partial = "Extracted Information: The pass key is 4711.\nAnswer: 4711\nConfidence Score:"

    def render(msgs):
        return gemma_tokenizer.apply_chat_template(
            msgs, tokenize=False, chat_template=template, **template_kwargs(msgs)
        )

    cont = render([*user, {"role": "assistant", "content": partial, "prefix": True}])
    assert cont == render(user) + partial
    # without the mark a trailing reply is a finished turn, answered in a new one
    assert render([*user, {"role": "assistant", "content": partial}]).endswith("model\n")
    finished = gemma_tokenizer.apply_chat_template(
        [*user, {"role": "assistant", "content": partial + " 5"}],
        tokenize=False,
        chat_template=template,
    )
    assert finished.startswith(cont) and finished[len(cont) :].startswith(" 5<end_of_turn>")
