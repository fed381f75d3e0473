"""The model a training run trains and its optimizer, before ``accelerator.prepare``: built in
the load dtype (a random init whole, outside ZeRO-3's partitioned construction), its random base
saved for evaluation when an adapter trains on it, LoRA-wrapped when asked, with the attention
a Ulysses launch runs; AdamW, or DeepSpeed's
CPU Adam when ZeRO offloads the optimizer."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chunkwise.train.recipe import Recipe, TrainConfig
from chunkwise.train.saving import save_full_model


def build_model_and_optimizer(
    r: Recipe,
    tokenizer: Any,
    accelerator: Any,
    *,
    cuda: bool,
    engine: str,
    precision: str,
    deepspeed: bool,
    is_main: bool,
) -> tuple[Any, Any, Path | None]:
    """(model, optimizer, the saved random base or None) for recipe ``r``.

    Under Ulysses the model is built with the attention the launch names (``model.
    attn_implementation: auto``; :func:`chunkwise.train.engine.check_ulysses` refused any other
    value before this)."""
    import dataclasses

    import torch

    from chunkwise.train.engine import load_dtype, sp_attention
    from chunkwise.train.modeling import apply_lora, build_model

    sp_attn = sp_attention()
    if sp_attn:
        r = dataclasses.replace(r, model=dataclasses.replace(r.model, attn_implementation=sp_attn))
    lora_cfg = r.model.lora
    dtype = getattr(
        torch,
        load_dtype(
            r.model.dtype, cuda=cuda, engine=engine, lora=lora_cfg.enabled, precision=precision
        ),
    )
    ds_plugin = accelerator.state.deepspeed_plugin if deepspeed else None
    # a random-init model is built whole (it is small), outside ZeRO-3's partitioned
    # construction (zero.Init), whose initialization draws differently: every engine then
    # starts from the same seeded weights; deepspeed.initialize partitions it afterwards
    whole = ds_plugin is not None and r.model.init == "random"
    with _without_zero_init(ds_plugin) if whole else contextlib.nullcontext():
        model = build_model(r, tokenizer, cuda=cuda, dtype=dtype)
        base_saved = None
        if lora_cfg.enabled and r.model.init == "random":
            base_saved = Path(r.output_dir) / "base"  # the random base an adapter needs
            if not (base_saved / "config.json").exists():
                save_full_model(model, tokenizer, base_saved, is_main=is_main)
            accelerator.wait_for_everyone()
        if lora_cfg.enabled:
            model = apply_lora(model, lora_cfg, tokenizer)
    return model, build_optimizer(model, r.train, ds_plugin), base_saved


def build_optimizer(model: Any, tc: TrainConfig, ds_plugin: Any) -> Any:
    """AdamW over the trainable parameters; DeepSpeed's CPU Adam when ZeRO offloads the
    optimizer (DeepSpeed's config also takes the step's micro-batch, accumulation and clipping)."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    opt_kwargs = dict(
        lr=tc.lr, betas=tuple(tc.adam_betas), eps=tc.adam_eps, weight_decay=tc.weight_decay
    )
    if ds_plugin is None:
        return torch.optim.AdamW(params, **opt_kwargs, foreach=True)
    ds_cfg = ds_plugin.deepspeed_config
    ds_cfg["train_micro_batch_size_per_gpu"] = 1
    ds_cfg["gradient_accumulation_steps"] = tc.grad_accum
    ds_cfg["gradient_clipping"] = tc.max_grad_norm
    offload = ((ds_cfg.get("zero_optimization") or {}).get("offload_optimizer") or {}).get("device")
    if offload in ("cpu", "nvme"):
        from deepspeed.ops.adam import DeepSpeedCPUAdam

        return DeepSpeedCPUAdam(params, **opt_kwargs)
    return torch.optim.AdamW(params, **opt_kwargs)


@contextlib.contextmanager
def _without_zero_init(ds_plugin: Any) -> Iterator[None]:
    """transformers builds models under ``deepspeed.zero.Init`` while accelerate's DeepSpeed
    config is registered with it; unregister it for the block, then register it again.
    (accelerate's own ``zero3_init_context_manager(enable=False)`` re-registers the same
    ZeRO-3 config, which transformers still reads as ZeRO-3.)"""
    from transformers.integrations import unset_hf_deepspeed_config

    unset_hf_deepspeed_config()
    try:
        yield
    finally:
        ds_plugin.set_deepspeed_weakref()


__all__ = ["build_model_and_optimizer", "build_optimizer"]
