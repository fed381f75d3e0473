"""An adapter is served the way it was trained: chat turns when its training used the chat
template (saved with its tokenizer), even on the embedded base model, which alone is a base
model served plain text. Getting this wrong sends a chat-trained adapter raw text, and it
answers out of format (what the demo's checkpoints did before)."""

from __future__ import annotations

import json
import shutil

import pytest

from chunkwise.llm import load_llm
from chunkwise.llm.spec import parse_spec

TEMPLATE = (
    "{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


@pytest.fixture(scope="module")
def default_adapter(tmp_path_factory):
    """A LoRA adapter over the embedded model whose folder names ``hf:default`` as its base
    (as training wrote it before the chat option) and carries a chat-template tokenizer."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from chunkwise.llm.embedded import converted_dir

    out = tmp_path_factory.mktemp("default-lora")
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(converted_dir()),
        LoraConfig(r=2, target_modules=["q_proj"]),
    )
    model.save_pretrained(out)
    tok = AutoTokenizer.from_pretrained(converted_dir())
    tok.chat_template = TEMPLATE
    tok.save_pretrained(out)
    (out / "chunkwise_model.json").write_text(json.dumps({"base": "hf:default"}))
    return out


@pytest.mark.slow
def test_hf_serves_a_chat_trained_adapter_on_the_embedded_base_as_chat(default_adapter, tmp_path):
    llm = load_llm(str(default_adapter))
    try:
        assert llm.chat is True
        text, _ = llm.render(llm.as_prompt("What is the pass key?"))
        assert text.endswith("What is the pass key?<end_of_turn>\n<start_of_turn>model\n")
    finally:
        llm.close()
    # the same adapter without a tokenizer of its own is on the base's plain prompts
    bare = tmp_path / "bare"
    bare.mkdir()
    for f in ("adapter_config.json", "adapter_model.safetensors", "chunkwise_model.json"):
        shutil.copyfile(default_adapter / f, bare / f)
    llm = load_llm(str(bare))
    try:
        assert llm.chat is False
    finally:
        llm.close()
    # what training now writes wins over the guess: chat=off is plain text
    (bare / "chunkwise_model.json").write_text(json.dumps({"base": "hf:default?chat=off"}))
    for f in default_adapter.glob("tokenizer*"):
        shutil.copyfile(f, bare / f.name)
    llm = load_llm(str(bare))
    try:
        assert llm.chat is False
    finally:
        llm.close()


@pytest.mark.slow
def test_vllm_resolution_keeps_an_adapters_chat_template_on_the_embedded_base(
    default_adapter,
):
    from chunkwise.llm.vllm_backend import _resolve

    spec = _resolve(parse_spec(f"vllm:{default_adapter}"))
    assert spec.adapter == str(default_adapter) and "chat" not in spec.options  # auto: template
    assert _resolve(parse_spec("vllm:default")).options["chat"] == "0"  # the base alone: plain
    (default_adapter / "chunkwise_model.json").write_text(
        json.dumps({"base": "hf:default?chat=on"})
    )
    try:
        assert _resolve(parse_spec(f"vllm:{default_adapter}")).options["chat"] == "on"
    finally:
        (default_adapter / "chunkwise_model.json").write_text(json.dumps({"base": "hf:default"}))
