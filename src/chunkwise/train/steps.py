"""One optimizer step's arithmetic: the learning-rate schedule, which data a rank sees
(data- and sequence-parallel layout), the step's loss units / tokens / FLOPs summed over ranks,
and the forward-backward of its micro-batches."""

from __future__ import annotations

import math
from typing import Any

from chunkwise.errors import BadInput


def lr_at(step: int, total: int, warmup: int, peak: float, min_ratio: float) -> float:
    """Learning rate for optimizer step ``step`` (0-based): linear warmup, then cosine."""
    if warmup > 0 and step < warmup:
        return peak * (step + 1) / warmup
    span = max(1, total - warmup)
    progress = min(1.0, (step - warmup) / span)
    return peak * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def _as_float(x: Any) -> float | None:
    """A grad norm as a float (DTensors from FSDP2 are gathered first)."""
    if x is None:
        return None
    if hasattr(x, "full_tensor"):
        x = x.full_tensor()
    return float(x)


def _sp_size(accelerator: Any) -> int:
    """Sequence-parallel degree set by the accelerate config (1 without one)."""
    pc = getattr(accelerator, "parallelism_config", None)
    return int(pc.sp_size) if pc is not None and getattr(pc, "sp_enabled", False) else 1


class Layout:
    """Which data this rank sees: data-parallel index/size and sequence-parallel rank/size."""

    def __init__(self, accelerator: Any):
        self.world = accelerator.num_processes
        self.rank = accelerator.process_index
        self.sp, self.sp_rank = 1, 0
        pc = getattr(accelerator, "parallelism_config", None)
        if pc is not None and getattr(pc, "cp_enabled", False):
            raise BadInput(
                "context parallelism (parallelism_config_cp_size > 1) is not wired into "
                "this loop; use configs/accelerate/ulysses.yaml (DeepSpeed Ulysses) for "
                "sequences longer than one GPU holds"
            )
        if pc is not None and getattr(pc, "sp_enabled", False):
            from deepspeed.utils import groups

            self.sp = groups._get_sequence_parallel_world_size()
            self.sp_rank = groups._get_sequence_parallel_rank()
            if self.sp_rank != self.rank % self.sp:
                raise RuntimeError("sequence-parallel groups are expected to be consecutive ranks")
        self.dp_world = self.world // self.sp
        self.dp_rank = self.rank // self.sp


def step_counts(
    accelerator: Any,
    batches: list[dict],
    layout: Layout,
    weighting: str,
    *,
    arch: Any = None,
    lora_params: int = 0,
    lora: bool = False,
) -> tuple[float, float, float]:
    """(loss units, tokens, FLOPs) of one optimizer step summed over every rank, each sequence
    counted once per sequence-parallel group. Units: sequences with targets (weighting=sequence)
    or target tokens (weighting=token); the loss of the step is its weighted sum / units."""
    import torch

    from chunkwise.train.mfu import step_flops

    lead = layout.sp_rank == 0
    key = "n_seqs" if weighting == "sequence" else "n_targets"
    flops = 0.0
    if lead and arch is not None:
        flops = sum(
            step_flops(arch, b["seq_lengths"], b["n_targets"], lora_params=lora_params, lora=lora)
            for b in batches
        )
    local = torch.tensor(
        [
            sum(b[key] for b in batches) if lead else 0,
            sum(b["n_tokens"] for b in batches) if lead else 0,
            flops,
        ],
        dtype=torch.float64,
        device=accelerator.device,
    )
    units, tokens, total_flops = accelerator.reduce(local, reduction="sum").tolist()
    return units, tokens, total_flops


def forward_backward(
    accelerator: Any,
    model: Any,
    batches: list[dict],
    *,
    scale: float,
    chunk: int = 8192,
    impl: str = "torch",
) -> Any:
    """Forward and backward every micro-batch of one step (gradient sync on the last one);
    returns this rank's summed, unscaled weighted loss (a detached scalar tensor)."""
    import torch

    from chunkwise.train.loss import batch_loss_sum

    loss_sum = torch.zeros((), dtype=torch.float32, device=accelerator.device)
    for b in batches:
        with accelerator.accumulate(model):
            tensors = {
                k: v.to(accelerator.device) for k, v in b.items() if isinstance(v, torch.Tensor)
            }
            s = batch_loss_sum(model, tensors, chunk=chunk, impl=impl)
            accelerator.backward(s * scale)
            loss_sum += s.detach().float()
    return loss_sum


__all__ = ["Layout", "forward_backward", "lr_at", "step_counts"]
