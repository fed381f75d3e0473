"""LoRA adapters that an engine cannot serve as adapters, merged into full weights once.

vLLM's LoRA support loads the low-rank pairs of linear layers only. An adapter trained with
``model.lora.trainable_tokens`` (peft trainable tokens: a few embedding rows, e.g. the chat
template's end-of-turn token) also changes the embedding, which vLLM would drop without a word.
Such an adapter is merged into its base (``peft``'s ``merge_and_unload``, which applies the
token rows too) and saved as an ordinary model folder under
``$CHUNKWISE_CACHE/models/merged-<hash>``, keyed by the bytes of the adapter's and base's files
(the base's weights too: two bases of one shape with different weights give two merged
folders), so the merge runs once per adapter and base version, by one process at a time
(:mod:`chunkwise.llm.built_once`). The weights' digests are
cached by file version (:func:`chunkwise.digests.cached_file_sha256`), so a 1 GB base is read
once, not at every load. The folder takes the adapter folder's tokenizer files
when it has them (its chat template is the one it was trained on), else the base's, and its
hash covers the files it takes.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from pathlib import Path

from chunkwise.digests import cached_file_sha256
from chunkwise.errors import BadInput
from chunkwise.io import parse_json
from chunkwise.llm.built_once import build_once

log = logging.getLogger("chunkwise.llm.merged")

#: files of an adapter folder that define it (the hash of the merged folder covers them)
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
TOKENIZER_PREFIXES = ("tokenizer", "special_tokens", "chat_template")


def adapter_config(adapter: str | Path) -> dict:
    """The adapter folder's adapter_config.json (a JSON object, else :class:`BadInput`)."""
    path = Path(adapter) / "adapter_config.json"
    try:  # parse_json: deep nesting is a ValueError too, never a RecursionError
        cfg = parse_json(path.read_bytes())
    except (OSError, ValueError):
        raise BadInput(
            f"adapter folder {str(adapter)!r} has no readable adapter_config.json"
        ) from None
    if not isinstance(cfg, dict):
        raise BadInput(
            f"adapter folder {str(adapter)!r}: adapter_config.json holds a JSON "
            f"{type(cfg).__name__}, not an object"
        )
    return cfg


def needs_merge(adapter: str | Path) -> bool:
    """Whether the adapter changes more than linear layers (trainable tokens, saved modules)."""
    try:
        cfg = adapter_config(adapter)
    except BadInput:  # no adapter here to read: the engine says what is wrong with it
        return False
    return bool(cfg.get("trainable_token_indices") or cfg.get("modules_to_save"))


def _tokenizer_files(adapter: Path, base: Path) -> list[Path]:
    """The tokenizer files a merged folder takes: the adapter folder's when it has them (the
    chat template it was trained under), else the base's."""
    source = adapter if (adapter / "tokenizer_config.json").is_file() else base
    return sorted(
        f for f in source.iterdir() if f.is_file() and f.name.startswith(TOKENIZER_PREFIXES)
    )


def _digest(base: Path, adapter: Path, digests: Path | None = None) -> str:
    h = hashlib.sha256()
    for f in ADAPTER_FILES:
        h.update((adapter / f).read_bytes())
    # the tokenizer files the folder takes: two copies of one adapter under different chat
    # templates (or one without its own) are two merged folders, not whichever was built first
    for f in _tokenizer_files(adapter, base):
        h.update(f"{f.name}:{cached_file_sha256(f, digests)}".encode())
    for f in sorted(base.glob("*.json")):
        h.update(f.name.encode())
        h.update(f.read_bytes())
    for f in sorted(base.glob("*.safetensors")):  # the weights by content
        h.update(f"{f.name}:{cached_file_sha256(f, digests)}".encode())
    return h.hexdigest()[:12]


def merged_dir(base: str | Path, adapter: str | Path, cache: Path | None = None) -> Path:
    """A full-weights model folder equal to ``base`` with ``adapter`` applied (built once)."""
    from chunkwise.environ import cache_root

    base, adapter = Path(base), Path(adapter)
    if not (base / "config.json").is_file():
        raise BadInput(
            f"cannot merge adapter {str(adapter)!r}: base {str(base)!r} is no model folder"
        )
    digests = cache / ".digests" if cache else None  # default: $CHUNKWISE_CACHE/digests
    out = (cache or cache_root() / "models") / f"merged-{_digest(base, adapter, digests)}"
    return build_once(out, _merged, lambda tmp: _merge(base, adapter, tmp))


def _merged(folder: Path) -> bool:
    return (folder / "config.json").is_file()


def _merge(base: Path, adapter: Path, tmp: Path) -> None:
    """``adapter`` merged into ``base``, saved with its tokenizer files into ``tmp``."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    log.info("merging adapter %s into %s (once per adapter version)", adapter, base)
    model = AutoModelForCausalLM.from_pretrained(str(base), dtype=torch.float32)
    model = PeftModel.from_pretrained(model, str(adapter)).merge_and_unload()
    model.save_pretrained(str(tmp))
    for f in _tokenizer_files(adapter, base):
        shutil.copyfile(f, tmp / f.name)


__all__ = ["adapter_config", "merged_dir", "needs_merge"]
