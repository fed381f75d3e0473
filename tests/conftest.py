"""Shared fixtures: real tokenizers trained in-process, the embedded model loaded once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The suite's real-model answers were set in fp32, and CI runs on CPUs with and without bf16
# instructions: every engine on CPU (hf:, vllm:, CLI subprocesses) runs fp32 unless a spec says
# otherwise. tests/llm/test_cpu_dtype.py lifts this to test the automatic choice.
os.environ["CHUNKWISE_CPU_DTYPE"] = "float32"

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("CHUNKWISE_SHARED", REPO.parent / "shared"))

_CORPUS = [
    "The grass is green. The sky is blue. The sun is yellow. Here we go.",
    "Long documents are cut into chunks; each chunk is read by a short-context model.",
    "Map, collapse and reduce: three stages that answer a question about a whole book.",
    "长文档被切分成块。每一块由短上下文模型阅读！然后汇总答案？",
    "Numbers like 12345 and 987.65 appear, with punctuation: commas, colons, and quotes.",
]


@pytest.fixture(scope="session")
def tiny_tokenizer():
    """A real byte-level BPE tokenizer trained in-process in well under a second."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=["<pad>", "<s>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_CORPUS * 20, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
    )


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory, tiny_tokenizer) -> Path:
    """A folder with a tiny random Llama (2 layers, width 32) and the tiny tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tiny_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        pad_token_id=tiny_tokenizer.pad_token_id,
        bos_token_id=tiny_tokenizer.bos_token_id,
        eos_token_id=tiny_tokenizer.eos_token_id,
    )
    path = tmp_path_factory.mktemp("tiny-llama")
    LlamaForCausalLM(cfg).save_pretrained(path)
    tiny_tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def save_random_lora():
    """``save(base_dir, out_dir)``: a LoRA adapter over ``base_dir`` whose random B matrices
    change the output (as a trained one would), with chunkwise_model.json naming the base."""
    import json

    def save(base_dir: Path, out_dir: Path) -> Path:
        import torch
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM

        model = get_peft_model(
            AutoModelForCausalLM.from_pretrained(base_dir),
            LoraConfig(r=4, target_modules=["q_proj", "v_proj"]),
        )
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_B" in name:
                    p.normal_(0, 1.0)
        model.save_pretrained(out_dir)
        (out_dir / "chunkwise_model.json").write_text(json.dumps({"base": f"hf:{base_dir}"}))
        return out_dir

    return save


@pytest.fixture(scope="session")
def gemma_tokenizer():
    """The embedded model's real tokenizer (262K vocabulary), without the model."""
    from transformers import AutoTokenizer

    from chunkwise.llm.embedded import converted_dir

    return AutoTokenizer.from_pretrained(converted_dir())


@pytest.fixture(scope="session")
def embedded_llm():
    """hf:default, loaded once per test session."""
    from chunkwise.llm import load_llm

    llm = load_llm("hf:default")
    yield llm
    llm.close()


@pytest.fixture(scope="session")
def default_mr_llm():
    """hf:default-mr (the packaged MapReduce adapter), loaded once per test session; skips
    where no adapter is committed."""
    from chunkwise.llm import default_mr, load_llm

    if not (default_mr.package_dir() / "adapter_model.safetensors").is_file():
        pytest.skip("no hf:default-mr adapter committed yet: run `make default-mr`")
    llm = load_llm("hf:default-mr")
    yield llm
    llm.close()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    if not (SHARED / "data").is_dir():
        pytest.skip(f"shared data folder not present at {SHARED}")
    return SHARED
