"""Shared fixtures: real tokenizers trained in-process, the embedded model loaded once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("WANDB_MODE", "disabled")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

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
def shared_dir() -> Path:
    if not (SHARED / "data").is_dir():
        pytest.skip(f"shared data folder not present at {SHARED}")
    return SHARED
