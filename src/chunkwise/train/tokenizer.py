"""Tokenizers for training: load one, or train a small byte-level BPE locally; chat templates.

The built-in ``llama3`` template writes the Llama-3 header format (``<|start_header_id|>role
<|end_header_id|>`` + two newlines + content + ``<|eot_id|>``) with no default system turn. It
is prefix-stable (rendering a conversation extends the rendering of its first turns), which
the label masking in :mod:`chunkwise.train.formats` relies on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput

log = logging.getLogger(__name__)

BOS = "<|begin_of_text|>"
EOT = "<|eot_id|>"
END = "<|end_of_text|>"
PAD = "<|finetune_right_pad_id|>"
HEADER_START = "<|start_header_id|>"
HEADER_END = "<|end_header_id|>"
SPECIAL = [BOS, END, HEADER_START, HEADER_END, EOT, PAD]

LLAMA3_TEMPLATE = (
    "{{ bos_token }}"
    "{% for m in messages %}"
    "<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def train_bpe(texts: Iterable[str], vocab_size: int = 1024) -> Any:
    """A byte-level BPE tokenizer with Llama-3-style special tokens, trained on ``texts``.

    ``tokenizer(text)`` (special tokens on) prepends ``<|begin_of_text|>`` as Llama 3's does;
    the llama3 chat template is attached. Deterministic for the same texts.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(list(texts), trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=BOS, eos_token=EOT, pad_token=PAD
    )
    fast.chat_template = LLAMA3_TEMPLATE
    return fast


def load_tokenizer(name_or_path: str, *, trust_remote_code: bool = False) -> Any:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name_or_path, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as e:
        raise BadInput(
            f"cannot load tokenizer {name_or_path!r}: {str(e).splitlines()[0]}"
        ) from None


def resolve_chat_template(tokenizer: Any, setting: str) -> str | None:
    """Apply ``model.chat_template`` to ``tokenizer``; returns the template in use (or None)."""
    if setting == "none":
        tokenizer.chat_template = None
        return None
    if setting == "auto":
        if getattr(tokenizer, "chat_template", None):
            return tokenizer.chat_template
        vocab = tokenizer.get_vocab()
        if all(t in vocab for t in (HEADER_START, HEADER_END, EOT)):
            tokenizer.chat_template = LLAMA3_TEMPLATE
            return LLAMA3_TEMPLATE
        return None
    if setting == "llama3":
        vocab = tokenizer.get_vocab()
        missing = [t for t in (HEADER_START, HEADER_END, EOT) if t not in vocab]
        if missing:
            raise BadInput(f"model.chat_template=llama3: the tokenizer lacks {', '.join(missing)}")
        tokenizer.chat_template = LLAMA3_TEMPLATE
        return LLAMA3_TEMPLATE
    path = Path(setting).expanduser()
    if not path.is_file():
        raise BadInput(
            f"model.chat_template: {setting!r} is not auto, none, llama3 or a template file"
        )
    tokenizer.chat_template = path.read_text(encoding="utf-8")
    return tokenizer.chat_template


def end_ids(tokenizer: Any) -> list[int]:
    """Token ids that end a generation: EOS plus Llama-3's end-of-turn when present."""
    ids = []
    vocab = tokenizer.get_vocab()
    for t in (tokenizer.eos_token, EOT, END):
        if t and t in vocab and vocab[t] not in ids:
            ids.append(vocab[t])
    return ids


__all__ = ["LLAMA3_TEMPLATE", "end_ids", "load_tokenizer", "resolve_chat_template", "train_bpe"]
