"""A LoRA step checkpoint over the embedded Gemma-3-270M, in the format a training run writes
(``checkpoints/model/`` and ``trainable.safetensors``, by the trainer's own writers), loads
in the hf backend as base + adapter with the same logits as the same adapter saved by peft
(what a final save holds). No training: the adapter's B matrices are drawn at random."""

from __future__ import annotations

import json

import pytest
from lora_checkpoints import next_token_logits

from chunkwise.io import atomic_write_json

pytestmark = pytest.mark.slow


PASSKEY_PROMPT = "The passkey is 71432. Remember it. The passkey is"


def test_embedded_model_lora_step_checkpoint_loads_as_base_plus_adapter(tmp_path):
    import torch
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from chunkwise.llm.embedded import converted_dir
    from chunkwise.llm.hf import BASE_SPEC_FILE
    from chunkwise.llm.step_checkpoint import STATE_FILE, TRAINABLE_FILE
    from chunkwise.train.checkpoint_contents import trainable_state_dict, write_model_files

    torch.manual_seed(0)
    src = converted_dir()
    tokenizer = AutoTokenizer.from_pretrained(src)
    model = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
    model = get_peft_model(model, cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0.0, 0.05)
    base = "hf:default?chat=off"
    ckpts = tmp_path / "run" / "checkpoints"
    write_model_files(ckpts, model, tokenizer, base_spec=base, is_main=True)
    step = ckpts / "step-00000001"
    step.mkdir()
    save_file(trainable_state_dict(model), str(step / TRAINABLE_FILE))
    (step / STATE_FILE).write_text(json.dumps({"step": 1}))
    adapter = tmp_path / "adapter"  # the same weights as peft saves them (a final save)
    model.save_pretrained(str(adapter))
    tokenizer.save_pretrained(str(adapter))
    atomic_write_json(adapter / BASE_SPEC_FILE, {"base": base})
    del model

    from_step = next_token_logits(str(step), PASSKEY_PROMPT)
    torch.testing.assert_close(
        from_step, next_token_logits(str(adapter), PASSKEY_PROMPT), rtol=1e-4, atol=1e-4
    )
    base = next_token_logits("hf:default", PASSKEY_PROMPT)
    assert (from_step - base).abs().max() > 1e-2  # the adapter applies
