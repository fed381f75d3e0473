"""Tokenize a corpus once: the tokenized examples of a run, cached under its output folder.

The cache key hashes everything the examples depend on: the data files' bytes, the tokenizer
(its serialized vocabulary, merges, specials and chat template), the prompt kind, the data
section of the recipe and the prompt template files. The main process builds and writes the
cache first (``accelerator.main_process_first()``); the other ranks, and every resume, load it.
The cache holds only arrays and JSON (``numpy.savez`` without pickles), never code.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise.train.formats import Example, FormatStats, build_examples, files_sha256

log = logging.getLogger(__name__)

#: bump when the cached layout or the meaning of the examples changes
CACHE_VERSION = 1


def tokenizer_sha256(tokenizer: Any) -> str:
    """A hash of what the tokenizer does: its full serialization, specials and chat template."""
    h = hashlib.sha256()
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        h.update(backend.to_str().encode())
    else:
        h.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode())
    h.update(str(getattr(tokenizer, "chat_template", "") or "").encode())
    h.update(json.dumps(getattr(tokenizer, "special_tokens_map", {}), sort_keys=True).encode())
    return h.hexdigest()


def _prompts_sha256() -> str:
    h = hashlib.sha256()
    root = resources.files("chunkwise.prompts")
    stack = [root]
    entries = []
    while stack:
        node = stack.pop()
        for entry in node.iterdir():
            if entry.is_dir():
                stack.append(entry)
            elif entry.name.endswith((".yaml", ".txt")):
                entries.append(entry)
    for entry in sorted(entries, key=lambda e: str(e)):
        h.update(entry.name.encode() + b"\0" + entry.read_bytes())
    return h.hexdigest()


def _plain(x: Any) -> Any:
    if is_dataclass(x) and not isinstance(x, type):
        return {k: _plain(v) for k, v in asdict(x).items()}
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def cache_key(data: Any, tokenizer: Any, kind: str, files: Sequence[Path]) -> str:
    parts = {
        "version": CACHE_VERSION,
        "data_sha256": files_sha256(files),
        "tokenizer_sha256": tokenizer_sha256(tokenizer),
        "kind": kind,
        "data": _plain(data),
        "prompts_sha256": _prompts_sha256(),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _stats_from(d: dict) -> FormatStats:
    s = FormatStats()
    for k, v in d.items():
        setattr(s, k, Counter(v) if isinstance(v, dict) else v)
    return s


def save(path: Path, examples: Sequence[Example], stats: FormatStats) -> None:
    lengths = np.array([len(e) for e in examples], dtype=np.int64)
    meta = {
        "ids": [e.id for e in examples],
        "stages": [e.stage for e in examples],
        "truncated": [bool(e.truncated) for e in examples],
        "stats": stats.to_dict(),
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        np.savez(
            f,
            lengths=lengths,
            input_ids=np.concatenate([e.input_ids for e in examples]).astype(np.int32),
            labels=np.concatenate([e.labels for e in examples]).astype(np.int32),
            meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
        )
    os.replace(tmp, path)


def load(path: Path) -> tuple[list[Example], FormatStats]:
    with np.load(path, allow_pickle=False) as z:
        lengths, ids, labels = z["lengths"], z["input_ids"], z["labels"]
        meta = json.loads(z["meta"].tobytes().decode())
    ends = np.cumsum(lengths)
    starts = ends - lengths
    out = [
        Example(rid, stage, ids[a:b].copy(), labels[a:b].copy(), truncated=t)
        for rid, stage, t, a, b in zip(
            meta["ids"], meta["stages"], meta["truncated"], starts, ends, strict=True
        )
    ]
    return out, _stats_from(meta["stats"])


def cached_examples(
    data: Any, tokenizer: Any, kind: str, files: Sequence[Path], cache_dir: Path | None
) -> tuple[list[Example], FormatStats, bool]:
    """(examples, stats, hit): from ``cache_dir`` when a cache with the same key is there, else
    built with :func:`build_examples` and written (``cache_dir=None``: no cache)."""
    if cache_dir is None:
        return (*build_examples(data, tokenizer, kind, files), False)
    path = cache_dir / f"examples-{cache_key(data, tokenizer, kind, files)[:24]}.npz"
    if path.exists():
        try:
            examples, stats = load(path)
        except (OSError, ValueError, KeyError) as e:
            log.warning("ignoring unreadable example cache %s: %s", path, e)
        else:
            log.info("data: %d examples from the cache %s", len(examples), path)
            return examples, stats, True
    examples, stats = build_examples(data, tokenizer, kind, files)
    cache_dir.mkdir(parents=True, exist_ok=True)
    save(path, examples, stats)
    return examples, stats, False


__all__ = ["cache_key", "cached_examples", "load", "save", "tokenizer_sha256"]
