"""LongAlign's loss weighting, exact across packing, gradient accumulation and ranks.

The objective of one optimizer step over M sequences (all micro-batches, all data-parallel
ranks) is the mean over sequences of each sequence's mean token loss::

    L = (1/M) * sum_i (1/N_i) * sum_{t in i} loss_t        (N_i = target tokens of sequence i)

Each token carries the weight ``1/N_i`` (``collate`` puts it in ``batch["weights"]``), so any
micro-batch contributes a plain weighted *sum* ``S_k``, and ``L = sum_k S_k / M``: how sequences
are packed or spread over ranks no longer matters. The loop counts M over the whole step first
(an all-reduce), then back-propagates ``S_k * scale`` with :func:`backward_scale`, undoing the
``1/grad_accum`` that ``accelerator.backward`` (or DeepSpeed) applies and the ``1/world`` of the
gradient all-reduce average. With ``weighting: token`` every weight is 1 and M counts target
tokens, which gives the usual token mean over the step.

Only target positions go through the LM head: the model is called with a
``logits_to_keep`` index, so a 64K-token row whose answer is 500 tokens makes 500 rows of logits,
not 64K. The cross-entropy runs in chunks under activation checkpointing, so at most one chunk
of logits is upcast to fp32 at a time; with Liger installed its cross-entropy kernel is used.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

IGNORE = -100


def _ce_chunk(logits: torch.Tensor, targets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return (F.cross_entropy(logits.float(), targets, reduction="none") * weights).sum()


def weighted_ce_sum(
    logits: torch.Tensor,
    targets: torch.Tensor,
    weights: torch.Tensor,
    *,
    chunk: int = 8192,
    segments: torch.Tensor | None = None,
    impl: str = "torch",
) -> torch.Tensor:
    """``sum_t weights_t * CE(logits_t, targets_t)`` over rows of ``logits`` (n, vocab)."""
    n = logits.shape[0]
    if n == 0:
        return logits.sum() * 0.0
    if impl == "liger":
        return _liger_sum(logits, targets, weights, segments)
    total = logits.new_zeros((), dtype=torch.float32)
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        if torch.is_grad_enabled() and logits.requires_grad:
            part = checkpoint(
                _ce_chunk, logits[s:e], targets[s:e], weights[s:e], use_reentrant=False
            )
        else:
            part = _ce_chunk(logits[s:e], targets[s:e], weights[s:e])
        total = total + part
    return total


def _liger_sum(
    logits: torch.Tensor,
    targets: torch.Tensor,
    weights: torch.Tensor,
    segments: torch.Tensor | None,
) -> torch.Tensor:
    """Liger's cross-entropy kernel, one call per sequence (its weight is constant inside one)."""
    from liger_kernel.transformers import LigerCrossEntropyLoss

    ce = LigerCrossEntropyLoss(reduction="sum")
    if segments is None:
        segments = torch.zeros_like(targets)
    change = torch.nonzero(segments[1:] != segments[:-1]).flatten().tolist()
    bounds = [0, *[c + 1 for c in change], len(targets)]
    total = logits.new_zeros((), dtype=torch.float32)
    for s, e in itertools.pairwise(bounds):
        total = total + ce(logits[s:e].contiguous(), targets[s:e]) * weights[s]
    return total


def batch_loss_sum(
    model: Any, batch: dict, *, chunk: int = 8192, impl: str = "torch"
) -> torch.Tensor:
    """Forward one collated micro-batch; returns its weighted loss sum ``S_k`` (a scalar)."""
    targets = batch["targets"]
    keep = targets != IGNORE
    # positions with a target in any row (a 1-D index: every transformers 4.45+ takes it)
    cols = torch.nonzero(keep.any(dim=0)).flatten()
    out = model(
        input_ids=batch["input_ids"],
        position_ids=batch["position_ids"],
        use_cache=False,
        logits_to_keep=cols,
    )
    logits = out.logits[keep[:, cols]]  # (n_targets, vocab), row-major like targets[keep]
    return weighted_ce_sum(
        logits,
        targets[keep],
        batch["weights"][keep].to(torch.float32),
        chunk=chunk,
        segments=batch["segments"][keep],
        impl=impl,
    )


def backward_scale(world: int, grad_accum: int, units: float) -> float:
    """Factor for ``S_k`` so the gradient after the ``1/grad_accum`` loss scaling and the
    ``1/world`` all-reduce average is the gradient of ``sum_k S_k / units``."""
    return world * grad_accum / max(units, 1e-12)


def mean_of_means(per_sequence_token_losses: list[torch.Tensor]) -> torch.Tensor:
    """Reference: the plain mean over sequences of each sequence's mean token loss."""
    return torch.stack([t.mean() for t in per_sequence_token_losses]).mean()


def reference_token_losses(model: Any, examples: list, device: Any = "cpu") -> list[torch.Tensor]:
    """Reference: each example run alone through the unmodified model (no packing, no mask, no
    logits selection), per-token losses on its target positions."""
    out = []
    for ex in examples:
        ids = torch.as_tensor(ex.input_ids, dtype=torch.long, device=device)[None]
        labels = torch.as_tensor(ex.labels, dtype=torch.long, device=device)
        logits = model(input_ids=ids).logits[0, :-1].float()
        tgt = labels[1:]
        keep = tgt != IGNORE
        out.append(F.cross_entropy(logits[keep], tgt[keep], reduction="none"))
    return out


__all__ = [
    "backward_scale",
    "batch_loss_sum",
    "mean_of_means",
    "reference_token_losses",
    "weighted_ce_sum",
]
