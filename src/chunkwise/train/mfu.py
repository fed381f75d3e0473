"""Model FLOPs utilisation: useful training FLOPs per second over the hardware's peak.

FLOPs of one training step (forward + backward = 3x forward; activation recomputation from
gradient checkpointing is *not* counted, so this is MFU, not hardware FLOPs utilisation):

* matmuls of the decoder: ``6 * N_dec`` per token, ``N_dec`` = weights of the attention and MLP
  projections (embeddings are a lookup, not a matmul). With LoRA the frozen weights get no weight
  gradient: ``4 * N_dec`` (forward + input gradients) plus ``6 *`` the adapter weights.
* LM head: ``6 * hidden * vocab`` per *target* token only (other positions never reach it).
* attention scores and values, causal: ``6 * layers * (heads * head_dim) * T^2`` per sequence of
  T tokens (half of the full T x T products, forward and backward). Packed sequences count
  their own T, not the pack's length. The PaLM appendix and nanochat count the full square
  (``12 * layers * heads * head_dim * T^2``), so their MFU at long T reads higher than ours for
  the same run; convert by adding the same term again.

Peak dense bf16 FLOP/s by GPU are vendor datasheet numbers (no sparsity).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

#: dense bf16 tensor-core peak per GPU, FLOP/s (substring of torch.cuda.get_device_name -> peak)
PEAK_BF16: list[tuple[str, float]] = [
    ("GH200", 989e12),
    ("H200", 989e12),
    ("H100 PCIe", 756e12),
    ("H100 NVL", 835e12),
    ("H100", 989e12),  # SXM
    ("H800", 989e12),
    ("B200", 2250e12),
    ("A100", 312e12),
    ("A800", 312e12),
    ("L40S", 362e12),
    ("A10G", 70e12),
]


def peak_flops(device_name: str | None) -> float | None:
    """Datasheet peak for a CUDA device name; None when unknown (CPU, unlisted GPU)."""
    if not device_name:
        return None
    for key, value in PEAK_BF16:
        if key.lower() in device_name.lower():
            return value
    return None


@dataclass(frozen=True)
class Arch:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int

    @classmethod
    def from_config(cls, cfg: Any) -> Arch:
        cfg = getattr(cfg, "text_config", cfg)
        heads = cfg.num_attention_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
        return cls(
            cfg.num_hidden_layers,
            cfg.hidden_size,
            heads,
            getattr(cfg, "num_key_value_heads", None) or heads,
            head_dim,
            cfg.intermediate_size,
            cfg.vocab_size,
        )

    @property
    def decoder_matmul_params(self) -> int:
        q = self.hidden * self.heads * self.head_dim
        kv = 2 * self.hidden * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * self.hidden
        mlp = 3 * self.hidden * self.intermediate  # gate, up, down
        return self.layers * (q + kv + o + mlp)


def step_flops(
    arch: Arch,
    seq_lengths: Sequence[int],
    n_targets: int,
    *,
    lora_params: int = 0,
    lora: bool = False,
) -> float:
    """Useful FLOPs of forward + backward over these sequences (see the module docstring)."""
    tokens = sum(seq_lengths)
    dense = (4 if lora else 6) * arch.decoder_matmul_params * tokens
    adapters = 6 * lora_params * tokens
    head = (4 if lora else 6) * arch.hidden * arch.vocab * n_targets
    attn = 6 * arch.layers * arch.heads * arch.head_dim * sum(t * t for t in seq_lengths)
    return float(dense + adapters + head + attn)


def flops_per_token(arch: Arch, seq_len: int, target_fraction: float = 1.0) -> float:
    """Training FLOPs per token for sequences of ``seq_len`` (for quick estimates)."""
    return step_flops(arch, [seq_len], int(seq_len * target_fraction)) / seq_len


def mfu(flops: float, seconds: float, devices: int, peak: float | None) -> float | None:
    if not peak or seconds <= 0 or devices < 1:
        return None
    return flops / (seconds * devices * peak)


__all__ = ["PEAK_BF16", "Arch", "flops_per_token", "mfu", "peak_flops", "step_flops"]
