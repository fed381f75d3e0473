"""Saving a run: step checkpoints (complete or absent), metric trimming on resume, and the
final model folder that ``chunkwise eval --model`` loads, written atomically."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import Any

from chunkwise.config import dump_yaml
from chunkwise.io import atomic_write_json
from chunkwise.train.recipe import Recipe

log = logging.getLogger("chunkwise.train.loop")

CKPT_RE = re.compile(r"^step-(\d+)$")


def checkpoints(root: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints (those with trainer_state.json, written last), oldest first."""
    if not root.is_dir():
        return []
    out = []
    for p in root.iterdir():
        m = CKPT_RE.match(p.name)
        if m and (p / "trainer_state.json").exists():
            out.append((int(m.group(1)), p))
    return sorted(out)


def trim_metrics(path: Path, upto: int) -> None:
    """Drop metric lines past step ``upto`` (left by a run killed after its last checkpoint)."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            if json.loads(line)["step"] <= upto:
                keep.append(line)
        except (ValueError, KeyError, TypeError):
            continue
    from chunkwise.io import atomic_write_text

    atomic_write_text(path, "".join(x + "\n" for x in keep))


def save_checkpoint(accelerator: Any, root: Path, step: int, state: dict, limit: int) -> None:
    """accelerator.save_state into step-N.tmp, then trainer_state.json, then rename: a kill
    at any moment leaves either a complete checkpoint or none."""
    final = root / f"step-{step:08d}"
    tmp = root / f"step-{step:08d}.tmp"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        atomic_write_json(tmp / "trainer_state.json", state)
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        if limit > 0:
            for _, old in checkpoints(root)[:-limit]:
                shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()


def save_full_model(model: Any, tokenizer: Any, path: Path, *, is_main: bool) -> None:
    """``save_pretrained`` a model that may be ZeRO-3-partitioned (every rank calls this: the
    weights are gathered first, else a partitioned tensor saves as shape ``(0,)``), into a temp
    folder renamed at the end."""
    partitioned = [p for p in model.parameters() if hasattr(p, "ds_id")]
    gather: Any = contextlib.nullcontext()
    if partitioned:
        import deepspeed

        gather = deepspeed.zero.GatheredParameters(partitioned, modifier_rank=None)
    with gather:
        if is_main:
            tmp = path.with_name(path.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            state_dict = {k: v.detach().clone() for k, v in model.state_dict().items()}
            model.save_pretrained(tmp, state_dict=state_dict)
            tokenizer.save_pretrained(tmp)
            shutil.rmtree(path, ignore_errors=True)
            tmp.rename(path)


#: files a final save writes into output_dir; ``train_info.json`` is written last (its presence
#: marks a complete final save)
FINAL_TMP = ".final.tmp"
WEIGHT_FILES = ("model.safetensors", "adapter_model.safetensors", "model.safetensors.index.json")


def incomplete_final(out_dir: Path) -> bool:
    """True when ``out_dir`` holds weights but no ``train_info.json``: a final save that did not
    finish (a kill during it); the next run of the same recipe saves it again."""
    has_weights = any((out_dir / f).exists() for f in WEIGHT_FILES)
    return has_weights and not (out_dir / "train_info.json").exists()


def publish(tmp: Path, out_dir: Path) -> None:
    """Move every file of ``tmp`` into ``out_dir``: the old train_info.json goes first, the new
    one last, so a kill at any moment leaves either a complete save or weights without
    train_info.json (:func:`incomplete_final`), never new weights beside an old train_info."""
    (out_dir / "train_info.json").unlink(missing_ok=True)
    names = sorted(p.name for p in tmp.iterdir() if p.name != "train_info.json")
    for name in [*names, "train_info.json"]:
        dst = out_dir / name
        if dst.is_dir() and not dst.is_symlink():
            shutil.rmtree(dst)
        os.replace(tmp / name, dst)
    tmp.rmdir()


def save_final(
    accelerator: Any,
    model: Any,
    tokenizer: Any,
    r: Recipe,
    out_dir: Path,
    base_saved: Path | None,
    summary: dict,
) -> None:
    from chunkwise.llm.hf import BASE_SPEC_FILE
    from chunkwise.train.modeling import EMBEDDED_NAMES

    state_dict = accelerator.get_state_dict(model)  # gathers ZeRO-3 / FSDP shards (all ranks)
    if not accelerator.is_main_process:
        accelerator.wait_for_everyone()
        return
    tmp = out_dir / FINAL_TMP
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    unwrapped = accelerator.unwrap_model(model)
    cfg = getattr(unwrapped, "config", None)
    if cfg is not None:
        cfg.use_cache = True
    unwrapped.save_pretrained(tmp, state_dict=state_dict)
    tokenizer.save_pretrained(tmp)
    if r.model.lora.enabled:
        if base_saved is not None:
            base = "hf:" + str(base_saved.resolve())
        elif r.model.name_or_path in EMBEDDED_NAMES:
            base = "hf:default"
        else:
            p = Path(r.model.name_or_path).expanduser()
            base = "hf:" + (str(p.resolve()) if p.exists() else r.model.name_or_path)
        # how it was trained is how it is served: chat turns or plain prompts
        chat = "on" if summary.get("prompt_kind") == "chat" else "off"
        atomic_write_json(tmp / BASE_SPEC_FILE, {"base": f"{base}?chat={chat}"})
    dump_yaml(r, tmp / "recipe.yaml")
    atomic_write_json(tmp / "train_info.json", summary)
    publish(tmp, out_dir)
    log.info("saved %s to %s", "LoRA adapter" if r.model.lora.enabled else "model", out_dir)
    accelerator.wait_for_everyone()


__all__ = [
    "FINAL_TMP",
    "checkpoints",
    "incomplete_final",
    "publish",
    "save_checkpoint",
    "save_final",
    "save_full_model",
    "trim_metrics",
]
