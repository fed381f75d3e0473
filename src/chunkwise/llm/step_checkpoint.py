"""A training run's step checkpoint (``OUTPUT/checkpoints/step-N/``) as a model to decode with.

A step checkpoint holds what ``accelerator.save_state`` wrote (weights, optimizer and RNG
states) and ``trainer_state.json``; it is not a transformers folder. What it needs beside its
weights is written once per run into ``OUTPUT/checkpoints/model/`` (:data:`MODEL_FILES`): the
model's ``config.json`` and the run's tokenizer, and for a LoRA run ``adapter_config.json`` and
``chunkwise_model.json`` (the base model spec, as in the final save). The weights:

- ``model.safetensors``: every weight (full fine-tuning, plain / DDP; DDP's ``module.`` prefix
  is stripped);
- ``trainable.safetensors`` (:data:`TRAINABLE_FILE`): a LoRA run's trainable weights only,
  named as in the peft model;
- ``trainable_fsdp/`` (:data:`FSDP_TRAINABLE`): a LoRA run's trainable weights under FSDP2, a
  ``torch.distributed.checkpoint`` folder of every rank's shards, read back whole in one process;
- ``pytorch_model/``: DeepSpeed ZeRO-2/3 shards, gathered with DeepSpeed's own
  ``zero_to_fp32`` (a LoRA run's frozen base is left out of them and comes from the base).

This module is the layout's one owner: the trainer writes it (``chunkwise.train``) and the hf
backend and ``chunkwise eval --checkpoints`` read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput

#: a step checkpoint's folder name
STEP_RE = re.compile(r"^step-(\d+)$")
#: written last into a step checkpoint: its presence marks it complete
STATE_FILE = "trainer_state.json"
#: beside the step folders: what every step checkpoint of the run loads with
MODEL_FILES = "model"
#: a LoRA run's trainable weights in a step checkpoint
TRAINABLE_FILE = "trainable.safetensors"
FULL_FILE = "model.safetensors"
#: a LoRA run's trainable weights under FSDP2 (torch.distributed.checkpoint shards)
FSDP_TRAINABLE = "trainable_fsdp"
DEEPSPEED_TAG = "pytorch_model"
#: what a finished run's final save writes last
FINAL_MARK = "train_info.json"
_PREFIXES = ("module.", "_orig_mod.")


@dataclass(frozen=True)
class StepCheckpoint:
    """One complete step checkpoint: its folder, step, run folder and model files."""

    folder: Path
    step: int
    run_dir: Path
    files: Path
    lora: bool


def step_of(folder: Path) -> int | None:
    """The step of a complete step checkpoint folder, else None."""
    m = STEP_RE.match(folder.name)
    return int(m.group(1)) if m and (folder / STATE_FILE).is_file() else None


def describe(folder: Path) -> StepCheckpoint | None:
    """``folder`` as a step checkpoint (None when it is not one); ``BadInput`` when it is one
    that cannot be loaded as a model (written before chunkwise kept its model files)."""
    step = step_of(folder)
    if step is None:
        return None
    files = folder.parent / MODEL_FILES
    run_dir = folder.parent.parent
    lora = (files / "adapter_config.json").is_file()
    if not lora and not (files / "config.json").is_file():
        raise BadInput(
            f"{folder}: this run has no {files} (the config and tokenizer its step checkpoints "
            f"load with; runs of an older chunkwise do not write it); evaluate the run's final "
            f"model ({run_dir}) instead, or retrain"
        )
    return StepCheckpoint(folder, step, run_dir, files, lora)


def run_checkpoints(run_dir: Path) -> list[StepCheckpoint]:
    """The complete step checkpoints of a training run folder, oldest first."""
    root = run_dir / "checkpoints"
    if not root.is_dir():
        return []
    found = [describe(p) for p in root.iterdir() if step_of(p) is not None]
    return sorted((c for c in found if c is not None), key=lambda c: c.step)


def _strip(name: str) -> str:
    for p in _PREFIXES:
        while name.startswith(p):
            name = name[len(p) :]
    return name


def read_dcp(folder: Path, prefix: str = "model.") -> dict[str, Any]:
    """Every tensor under ``prefix`` of a ``torch.distributed.checkpoint`` folder, whole (its
    shards joined), in this process (no process group needed), named without ``prefix``."""
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    meta = dcp.FileSystemReader(str(folder)).read_metadata().state_dict_metadata
    sd = {
        k[len(prefix) :]: torch.empty(m.size, dtype=m.properties.dtype)
        for k, m in meta.items()
        if k.startswith(prefix) and isinstance(m, TensorStorageMetadata)
    }
    dcp.load({prefix.rstrip("."): sd}, checkpoint_id=str(folder), no_dist=True)
    return sd


def state_dict(ck: StepCheckpoint) -> dict[str, Any]:
    """The weights a step checkpoint holds, named as in the model it was saved from."""
    from safetensors.torch import load_file

    if (ck.folder / TRAINABLE_FILE).is_file():
        sd = load_file(str(ck.folder / TRAINABLE_FILE))
    elif (ck.folder / FULL_FILE).is_file():
        sd = load_file(str(ck.folder / FULL_FILE))
    elif (ck.folder / FSDP_TRAINABLE).is_dir():
        sd = read_dcp(ck.folder / FSDP_TRAINABLE)
    elif (ck.folder / DEEPSPEED_TAG).is_dir():
        try:
            from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
        except ImportError:
            raise BadInput(
                f"{ck.folder}: a DeepSpeed checkpoint; reading it needs deepspeed "
                "(pip install deepspeed)"
            ) from None
        sd = get_fp32_state_dict_from_zero_checkpoint(
            str(ck.folder), tag=DEEPSPEED_TAG, exclude_frozen_parameters=ck.lora
        )
    else:
        raise BadInput(
            f"{ck.folder}: no weights chunkwise can read ({FULL_FILE}, {TRAINABLE_FILE}, "
            f"{FSDP_TRAINABLE}/ or {DEEPSPEED_TAG}/); full fine-tuning FSDP step checkpoints are sharded: merge them first with "
            "`accelerate merge-weights`"
        )
    return {_strip(k): v for k, v in sd.items()}


def load_weights(model: Any, sd: dict[str, Any], where: Path, *, lora: bool) -> None:
    """Load ``sd`` into ``model``: every name must be the model's; a LoRA model must get every
    trainable weight, a full model every weight but those tied to a loaded one."""
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if unexpected:
        raise BadInput(f"{where}: weight {unexpected[0]!r} is not one of the model's")
    if lora:
        lost = [n for n, p in model.named_parameters() if p.requires_grad and n not in sd]
    else:
        full = model.state_dict(keep_vars=True)
        loaded = {full[n].data_ptr() for n in sd if n in full}
        lost = [n for n in missing if n in full and full[n].data_ptr() not in loaded]
    if lost:
        raise BadInput(f"{where}: holds no weight {lost[0]!r} (of {len(lost)} missing)")


def load_model(ck: StepCheckpoint, base_path: str, *, dtype: Any, attn: str, trust: bool) -> Any:
    """The model of a step checkpoint: the run's config with the checkpoint's weights, or (a
    LoRA run) the base at ``base_path`` with a fresh adapter carrying the checkpoint's."""
    from transformers import AutoConfig, AutoModelForCausalLM

    sd = state_dict(ck)
    kw = dict(dtype=dtype, attn_implementation=attn, trust_remote_code=trust)
    if ck.lora:
        from peft import PeftConfig, get_peft_model

        model = AutoModelForCausalLM.from_pretrained(base_path, **kw)
        model = get_peft_model(model, PeftConfig.from_pretrained(str(ck.files)))
    else:
        cfg = AutoConfig.from_pretrained(str(ck.files), trust_remote_code=trust)
        model = AutoModelForCausalLM.from_config(cfg, **kw)
        if (ck.files / "generation_config.json").is_file():  # stops where the final model does
            from transformers import GenerationConfig

            model.generation_config = GenerationConfig.from_pretrained(str(ck.files))
    load_weights(model, sd, ck.folder, lora=ck.lora)
    return model


__all__ = [
    "DEEPSPEED_TAG",
    "FINAL_MARK",
    "FSDP_TRAINABLE",
    "FULL_FILE",
    "MODEL_FILES",
    "STATE_FILE",
    "STEP_RE",
    "TRAINABLE_FILE",
    "StepCheckpoint",
    "describe",
    "load_model",
    "load_weights",
    "read_dcp",
    "run_checkpoints",
    "state_dict",
    "step_of",
]
