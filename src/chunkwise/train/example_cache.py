"""Tokenize a corpus once: the tokenized examples of a run, cached under its output folder.

The cache key hashes everything the examples depend on: the data files' bytes, the tokenizer
(its serialized vocabulary, merges, specials and chat template), the prompt kind, the data
section of the recipe and the prompt template files. The main process builds and writes the
cache first (``accelerator.main_process_first()``); the other ranks, and every resume, load it.
The cache holds only arrays and JSON (``numpy.savez`` without pickles), never code.

A cache file that cannot be used (empty, truncated, random bytes, fields of the wrong type) is
a miss, logged with the file and the reason; the examples are built again and the file replaced.
:func:`save` writes a temp file, fsyncs it, renames it over the old one and fsyncs the folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, is_dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from chunkwise.io import fsync_dir
from chunkwise.train.formats import Example, FormatStats, build_examples, files_sha256

log = logging.getLogger(__name__)

#: bump when the cached layout or the meaning of the examples changes
CACHE_VERSION = 2


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


class CacheDamaged(Exception):
    """An example cache file that cannot be used as it is (empty, truncated, not an npz of ours,
    fields of the wrong type or length); :func:`cached_examples` rebuilds and replaces it."""


def _need(ok: bool, why: str) -> None:
    if not ok:
        raise CacheDamaged(why)


_COUNTERS = ("skipped", "stages", "formats", "mix")


def _stats_from(d: Any) -> FormatStats:
    """FormatStats from its ``to_dict()``, every field present and of its type."""
    s = FormatStats()
    fields = set(s.to_dict())
    _need(
        isinstance(d, dict) and set(d) == fields, f"meta.stats must hold exactly {sorted(fields)}"
    )
    for k, v in d.items():
        if k in _COUNTERS:
            _need(
                isinstance(v, dict)
                and all(isinstance(n, int) and not isinstance(n, bool) for n in v.values()),
                f"meta.stats.{k} must map names to counts",
            )
            setattr(s, k, Counter(v))
        else:
            _need(isinstance(v, int) and not isinstance(v, bool), f"meta.stats.{k} must be a count")
            setattr(s, k, v)
    return s


def save(path: Path, examples: Sequence[Example], stats: FormatStats) -> None:
    """Write the cache crash-safely: a temp file beside ``path``, fsynced, renamed over it, and
    the folder fsynced (a kill or power loss leaves the old file or the new one)."""
    lengths = np.array([len(e) for e in examples], dtype=np.int64)
    meta = {
        "ids": [e.id for e in examples],
        "stages": [e.stage for e in examples],
        "truncated": [bool(e.truncated) for e in examples],
        "stats": stats.to_dict(),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(
                f,
                lengths=lengths,
                input_ids=np.concatenate([e.input_ids for e in examples]).astype(np.int32),
                labels=np.concatenate([e.labels for e in examples]).astype(np.int32),
                meta=np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8),
            )
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


#: the arrays of a cache file and the dtype each must have
_ARRAYS = {"lengths": np.int64, "input_ids": np.int32, "labels": np.int32, "meta": np.uint8}


def _read_arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        _need(isinstance(z, np.lib.npyio.NpzFile), "not an npz archive")
        _need(set(z.files) == set(_ARRAYS), f"arrays {sorted(z.files)}, want {sorted(_ARRAYS)}")
        arrays = {k: z[k] for k in _ARRAYS}
    for k, dtype in _ARRAYS.items():
        a = arrays[k]
        _need(
            a.ndim == 1 and a.dtype == dtype, f"{k} is {a.dtype}{list(a.shape)}, want 1-D {dtype}"
        )
    return arrays


def _read_meta(raw: np.ndarray, n: int) -> dict[str, Any]:
    from chunkwise.io import parse_json

    meta = parse_json(raw.tobytes())
    _need(isinstance(meta, dict), "meta is not a JSON object")
    for key, kind in (("ids", str), ("stages", str), ("truncated", bool)):
        v = meta.get(key)
        _need(
            isinstance(v, list) and len(v) == n and all(isinstance(x, kind) for x in v),
            f"meta.{key} must be a list of {n} {kind.__name__} values",
        )
    return meta


def _load(path: Path) -> tuple[list[Example], FormatStats]:
    z = _read_arrays(path)
    lengths, ids, labels = z["lengths"], z["input_ids"], z["labels"]
    _need(bool((lengths > 0).all()), "an example of length 0 or less")
    _need(
        int(lengths.sum()) == len(ids) == len(labels),
        f"lengths add up to {int(lengths.sum())}, but there are {len(ids)} ids and "
        f"{len(labels)} labels",
    )
    meta = _read_meta(z["meta"], len(lengths))
    stats = _stats_from(meta.get("stats"))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    out = [
        Example(rid, stage, ids[a:b].copy(), labels[a:b].copy(), truncated=t)
        for rid, stage, t, a, b in zip(
            meta["ids"], meta["stages"], meta["truncated"], starts, ends, strict=True
        )
    ]
    return out, stats


def load(path: Path) -> tuple[list[Example], FormatStats]:
    """The examples and stats of a cache file; :class:`CacheDamaged` (saying why) when it
    cannot be read or does not hold what :func:`save` writes."""
    try:
        return _load(path)
    except CacheDamaged:
        raise
    except Exception as e:  # whatever reading fails on, the cache is rebuilt
        raise CacheDamaged(f"{type(e).__name__}: {e}") from e


def cached_examples(
    data: Any, tokenizer: Any, kind: str, files: Sequence[Path], cache_dir: Path | None
) -> tuple[list[Example], FormatStats, bool]:
    """(examples, stats, hit): from ``cache_dir`` when a cache with the same key is there, else
    built with :func:`build_examples` and written (``cache_dir=None``: no cache). A cache file
    that cannot be read is a miss: logged with the reason, rebuilt and replaced."""
    if cache_dir is None:
        return (*build_examples(data, tokenizer, kind, files), False)
    path = cache_dir / f"examples-{cache_key(data, tokenizer, kind, files)[:24]}.npz"
    if path.exists():
        try:
            examples, stats = load(path)
        except CacheDamaged as e:
            log.warning("example cache %s is damaged (%s): rebuilding it", path, e)
        else:
            log.info("data: %d examples from the cache %s", len(examples), path)
            return examples, stats, True
    examples, stats = build_examples(data, tokenizer, kind, files)
    save(path, examples, stats)
    return examples, stats, False


__all__ = ["CacheDamaged", "cache_key", "cached_examples", "load", "save", "tokenizer_sha256"]
