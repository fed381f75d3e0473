"""What a step checkpoint holds beyond accelerate's defaults (the layout is
:mod:`chunkwise.llm.step_checkpoint`'s).

- A LoRA run's step checkpoint holds the trainable weights (adapter, trainable token rows),
  optimizer and RNG states only, not the frozen base (~16 GB for an 8B model): plain and DDP
  runs save ``trainable.safetensors`` through accelerate's save/load state hooks; DeepSpeed
  ZeRO-2/3 runs pass ``exclude_frozen_parameters`` to DeepSpeed's own ``save_checkpoint``
  (under ZeRO-3 the frozen base is partitioned, so leaving it out is DeepSpeed's call to make)
  and load with ``load_module_strict=False``. A resume rebuilds the base from the same source
  (the pretrained model, or the run's saved random base) and loads the trainable weights onto
  it. FSDP2 runs save the trainable weights' shards only (``trainable_fsdp/``, a
  ``torch.distributed.checkpoint`` folder of ``get_model_state_dict(ignore_frozen_params=True)``)
  beside accelerate's sharded optimizer state (:func:`save_state`): accelerate's own FSDP save
  writes every weight and takes no filter, so the model is kept out of ``save_state`` and saved
  here. FSDP1 saves the whole sharded model as before.
- ``OUTPUT/checkpoints/model/``, written once per run: the config and tokenizer every step
  checkpoint loads with, and for LoRA the adapter config and base spec, so that
  ``chunkwise eval --model OUTPUT/checkpoints/step-N`` works.
"""

from __future__ import annotations

import contextlib
import copy
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.io import atomic_write_json
from chunkwise.llm.step_checkpoint import FSDP_TRAINABLE, MODEL_FILES, TRAINABLE_FILE, load_weights


def _plain(accelerator: Any) -> bool:
    from accelerate.utils import DistributedType

    return accelerator.distributed_type not in (DistributedType.DEEPSPEED, DistributedType.FSDP)


def trainable_state_dict(model: Any) -> dict[str, Any]:
    """The trainable parameters of ``model`` (detached, contiguous, on CPU), by name."""
    return {
        n: p.detach().to("cpu").contiguous() for n, p in model.named_parameters() if p.requires_grad
    }


def install_hooks(accelerator: Any, lora: bool) -> None:
    """For a LoRA run on a plain or DDP engine: ``save_state`` writes the trainable weights
    alone (``trainable.safetensors``) and ``load_state`` loads them back onto the base."""
    if not lora or not _plain(accelerator):
        return

    def save_hook(models: list, weights: list, output_dir: str) -> None:
        from safetensors.torch import save_file

        if not weights:
            return
        if len(models) != 1:
            raise RuntimeError(f"expected one prepared model, got {len(models)}")
        sd = trainable_state_dict(accelerator.unwrap_model(models[0]))
        weights.clear()  # accelerate writes no model.safetensors (the whole model)
        if accelerator.is_main_process:
            save_file(sd, str(Path(output_dir) / TRAINABLE_FILE), metadata={"format": "pt"})

    def load_hook(models: list, input_dir: str) -> None:
        from safetensors.torch import load_file

        if not models:
            return
        path = Path(input_dir) / TRAINABLE_FILE
        if not path.is_file():
            raise BadInput(f"{input_dir}: a LoRA run's checkpoint without {TRAINABLE_FILE}")
        model = accelerator.unwrap_model(models[0])
        load_weights(model, load_file(str(path)), path, lora=True)
        models.clear()  # accelerate loads no model.safetensors

    accelerator.register_save_state_pre_hook(save_hook)
    accelerator.register_load_state_pre_hook(load_hook)


def _deepspeed(accelerator: Any) -> bool:
    from accelerate.utils import DistributedType

    return accelerator.distributed_type == DistributedType.DEEPSPEED


def _fsdp2(accelerator: Any) -> bool:
    from accelerate.utils import DistributedType

    return (
        accelerator.distributed_type == DistributedType.FSDP
        and accelerator.state.fsdp_plugin.fsdp_version == 2
    )


@contextlib.contextmanager
def _model_aside(accelerator: Any) -> Iterator[tuple[list, list]]:
    """accelerate's ``save_state``/``load_state`` without the prepared model and optimizer
    (they still handle RNG, schedulers, samplers and registered objects); yields them."""
    models, optimizers = accelerator._models, accelerator._optimizers
    if len(models) != 1 or len(optimizers) != 1:
        raise RuntimeError(
            f"expected one model and one optimizer, got {len(models)}, {len(optimizers)}"
        )
    accelerator._models, accelerator._optimizers = [], []
    try:
        yield models, optimizers
    finally:
        accelerator._models, accelerator._optimizers = models, optimizers


def _trainable_sd(model: Any) -> dict[str, Any]:
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(ignore_frozen_params=True))


def save_state(accelerator: Any, folder: str, *, lora: bool) -> None:
    """``accelerator.save_state(folder)`` writing what trains: a LoRA run under DeepSpeed leaves
    the frozen base out (``exclude_frozen_parameters``); under FSDP2 the trainable weights'
    shards go to ``folder/trainable_fsdp/`` and the optimizer's to accelerate's usual place
    (FSDP1 still saves the whole sharded model)."""
    if not lora or _plain(accelerator):
        accelerator.save_state(folder)
    elif _deepspeed(accelerator):
        accelerator.save_state(folder, exclude_frozen_parameters=True)
    elif _fsdp2(accelerator):
        import torch.distributed.checkpoint as dcp
        from accelerate.utils import save_fsdp_optimizer

        with _model_aside(accelerator) as (models, optimizers):
            accelerator.save_state(folder)
        dcp.save(
            {"model": _trainable_sd(models[0])}, checkpoint_id=str(Path(folder) / FSDP_TRAINABLE)
        )
        plugin = accelerator.state.fsdp_plugin
        save_fsdp_optimizer(plugin, accelerator, optimizers[0], models[0], folder, 0)
    else:  # FSDP1: accelerate's whole sharded model, as before
        accelerator.save_state(folder)


def load_state(accelerator: Any, folder: str, *, lora: bool) -> None:
    """``accelerator.load_state(folder)`` for a checkpoint :func:`save_state` wrote (a LoRA
    run's trainable weights onto the base this run rebuilt)."""
    if not lora or _plain(accelerator):
        accelerator.load_state(folder)
    elif _deepspeed(accelerator):
        accelerator.load_state(folder, load_module_strict=False)
    elif not _fsdp2(accelerator):
        accelerator.load_state(folder)
    else:
        import torch.distributed.checkpoint as dcp
        from accelerate.utils import load_fsdp_optimizer
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        path = Path(folder) / FSDP_TRAINABLE
        if not path.is_dir():
            raise BadInput(f"{folder}: a LoRA run's FSDP2 checkpoint without {FSDP_TRAINABLE}/")
        with _model_aside(accelerator) as (models, optimizers):
            accelerator.load_state(folder)
        sd = _trainable_sd(models[0])
        dcp.load({"model": sd}, checkpoint_id=str(path))
        set_model_state_dict(models[0], sd, options=StateDictOptions(strict=False))
        plugin = accelerator.state.fsdp_plugin
        load_fsdp_optimizer(plugin, accelerator, optimizers[0], models[0], folder, 0)


def write_model_files(
    ckpt_root: Path, model: Any, tokenizer: Any, *, base_spec: str | None, is_main: bool
) -> Path:
    """``ckpt_root/model/``: the unwrapped ``model``'s config and generation config (or, LoRA:
    its adapter config and ``base_spec``) and the tokenizer, written by every run (a rerun with other settings
    replaces the old run's) into a temporary folder swapped into place."""
    from chunkwise.llm.hf import BASE_SPEC_FILE

    folder = ckpt_root / MODEL_FILES
    if not is_main:
        return folder
    tmp = ckpt_root / (MODEL_FILES + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if base_spec is not None:
        model.peft_config["default"].save_pretrained(str(tmp))
        atomic_write_json(tmp / BASE_SPEC_FILE, {"base": base_spec})
    else:
        cfg = copy.deepcopy(model.config)
        cfg.use_cache = True
        cfg.save_pretrained(str(tmp))
        gen = getattr(model, "generation_config", None)  # where decoding stops, as the final's
        if gen is not None:
            gen.save_pretrained(str(tmp))
    tokenizer.save_pretrained(str(tmp))
    old = ckpt_root / (MODEL_FILES + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if folder.is_dir():
        folder.rename(old)
    tmp.rename(folder)
    shutil.rmtree(old, ignore_errors=True)
    return folder


def setup_checkpoints(
    accelerator: Any, model: Any, tokenizer: Any, ckpt_root: Path, *, base_spec: str | None
) -> None:
    """After ``prepare``: a LoRA run (``base_spec`` given) checkpoints its trainable weights
    only (:func:`install_hooks`), and the main process writes ``checkpoints/model/``."""
    install_hooks(accelerator, base_spec is not None)
    unwrapped = accelerator.unwrap_model(model)
    write_model_files(
        ckpt_root, unwrapped, tokenizer, base_spec=base_spec, is_main=accelerator.is_main_process
    )
    accelerator.wait_for_everyone()


__all__ = [
    "install_hooks",
    "load_state",
    "save_state",
    "setup_checkpoints",
    "trainable_state_dict",
    "write_model_files",
]
