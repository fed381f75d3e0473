"""Padding-free attention without flash-attn: causal SDPA run per packed sequence.

transformers detects packed rows from ``position_ids`` restarting at 0, but for ``sdpa`` it
turns them into a block-diagonal (T x T) mask, which costs attention over the whole pack
(``(sum T_i)^2``) and forces SDPA's math kernel. This implementation instead cuts each row at
the restarts and runs ``scaled_dot_product_attention(is_causal=True)`` on each sequence: exact,
``sum T_i^2`` work, and SDPA's fused kernels (flash on CUDA). It is registered with
transformers as ``chunkwise_varlen`` and is what ``attn_implementation: auto`` picks when
flash-attn is not installed. Rows without restarts (one sequence, or right padding that
continues the positions) take a single causal SDPA call, as ``sdpa`` would.

Sliding-window layers (Gemma-3's local layers: ``sliding_window`` reaches the attention call
as a keyword) see only the last ``sliding_window`` positions, as transformers' own masks and
vLLM give them at inference: query blocks of ``sliding_window`` positions each attend to
their band of keys, ``O(T * window)`` work.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
import torch.nn.functional as F

NAME = "chunkwise_varlen"
_registered = False


def segments(position_ids: torch.Tensor) -> list[list[tuple[int, int]]]:
    """Per row, the [start, end) spans between position restarts (a drop that is not +1)."""
    pos = position_ids
    step = pos[:, 1:] - pos[:, :-1]
    out = []
    for b in range(pos.shape[0]):
        cuts = (torch.nonzero(step[b] != 1).flatten() + 1).tolist()
        bounds = [0, *cuts, pos.shape[1]]
        out.append(list(itertools.pairwise(bounds)))
    return out


def varlen_sdpa_forward(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """query (B, H, T, D), key/value (B, Hkv, T, D) -> (B, T, H, D), like ``sdpa_attention_forward``."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    position_ids = kwargs.get("position_ids")
    if attention_mask is not None or position_ids is None or query.shape[2] != key.shape[2]:
        return sdpa_attention_forward(
            module,
            query,
            key,
            value,
            attention_mask,
            dropout=dropout,
            scaling=scaling,
            is_causal=is_causal,
            **kwargs,
        )
    if position_ids.shape[0] != query.shape[0]:
        position_ids = position_ids.expand(query.shape[0], -1)
    window = kwargs.get("sliding_window") or None
    p = dropout if module.training else 0.0

    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return causal_attention(q, k, v, window=window, dropout_p=p, scale=scaling)

    all_spans = segments(position_ids)
    if all(len(spans) == 1 for spans in all_spans):  # no packing: one batched causal call
        return attend(query, key, value).transpose(1, 2).contiguous(), None
    rows = []
    for b, spans in enumerate(all_spans):
        parts = [
            attend(query[b : b + 1, :, s:e], key[b : b + 1, :, s:e], value[b : b + 1, :, s:e])
            for s, e in spans
        ]
        rows.append(parts[0] if len(parts) == 1 else torch.cat(parts, dim=2))
    out = rows[0] if len(rows) == 1 else torch.cat(rows, dim=0)
    return out.transpose(1, 2).contiguous(), None


def causal_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    *,
    window: int | None = None,
    dropout_p: float = 0.0,
    scale: float | None = None,
) -> torch.Tensor:
    """Causal SDPA over (B, H, T, D); with ``window``, position i sees keys j with
    ``i - window < j <= i`` (transformers' sliding-window mask), computed per block of
    ``window`` queries against the keys that block can reach."""
    gqa = query.shape[1] != key.shape[1]
    n = query.shape[2]
    if window is None or n <= window:
        return F.scaled_dot_product_attention(
            query, key, value, dropout_p=dropout_p, is_causal=True, scale=scale, enable_gqa=gqa
        )
    blocks = []
    for qs in range(0, n, window):
        qe, ks = min(n, qs + window), max(0, qs - window + 1)
        q_idx = torch.arange(qs, qe, device=query.device)[:, None]
        k_idx = torch.arange(ks, qe, device=query.device)[None, :]
        allowed = (k_idx <= q_idx) & (k_idx > q_idx - window)
        blocks.append(
            F.scaled_dot_product_attention(
                query[:, :, qs:qe],
                key[:, :, ks:qe],
                value[:, :, ks:qe],
                attn_mask=allowed,
                dropout_p=dropout_p,
                scale=scale,
                enable_gqa=gqa,
            )
        )
    return torch.cat(blocks, dim=2)


def register() -> str:
    """Register ``chunkwise_varlen`` with transformers (idempotent); returns its name."""
    global _registered
    if not _registered:
        from transformers import AttentionInterface
        from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

        AttentionInterface.register(NAME, varlen_sdpa_forward)
        # like flash attention: no 4D mask (None unless there is a padding mask)
        AttentionMaskInterface.register(NAME, flash_attention_mask)
        _registered = True
    return NAME


__all__ = ["NAME", "causal_attention", "register", "segments", "varlen_sdpa_forward"]
