"""Whether the optional GPU kernels (flash-attn, Liger) really work in this environment.

Finding a package (``importlib.util.find_spec``) is not the same as being able to use it: a
flash-attn wheel built for another torch ends in ``ImportError: undefined symbol ...`` at its
first import, a Triton without a GPU driver fails at the first kernel launch. So
:func:`flash_attn_problem` imports flash-attn (and the function transformers calls), and
:func:`liger_problem` imports Liger and runs one forward and backward of a tiny Llama through
its kernels and its cross-entropy against PyTorch's own layers. Each returns ``None`` when the
package is usable and otherwise one line saying why (the import error, or the mismatch), which
``model.attn_implementation: auto`` and ``model.liger: auto`` log when they fall back. The
answers are kept per process (and per device for Liger).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

_cache: dict[str, str | None] = {}


def installed(name: str) -> bool:
    """Whether a package of that name can be found (not whether it imports)."""
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}".rstrip(": ")


def flash_attn_problem() -> str | None:
    """None when flash-attn imports with ``flash_attn_varlen_func`` (what transformers' flash
    attention calls); else why not (``not installed`` or the import's error)."""
    if "flash_attn" not in _cache:
        if not installed("flash_attn"):
            _cache["flash_attn"] = "not installed"
        else:
            try:
                module = importlib.import_module("flash_attn")
                if not callable(getattr(module, "flash_attn_varlen_func", None)):
                    raise ImportError("flash_attn has no flash_attn_varlen_func")
                _cache["flash_attn"] = None
            except Exception as e:  # a broken wheel raises ImportError, OSError, RuntimeError...
                _cache["flash_attn"] = _first_line(e)
    return _cache["flash_attn"]


#: |relative difference| allowed between Liger's and PyTorch's loss and gradients (fp32)
LIGER_TOL = 1e-3


def liger_problem(device: str = "cuda") -> str | None:
    """None when Liger imports and one forward and backward of a tiny Llama on ``device``
    through Liger's RMSNorm, RoPE, SwiGLU and cross-entropy matches PyTorch's (loss and
    gradients within :data:`LIGER_TOL`); else why not."""
    key = f"liger:{device}"
    if key not in _cache:
        if not installed("liger_kernel"):
            _cache[key] = "not installed"
        else:
            try:
                _cache[key] = _liger_one_step(device)
            except Exception as e:
                _cache[key] = _first_line(e)
    return _cache[key]


def _liger_one_step(device: str) -> str | None:
    import copy

    import torch
    from liger_kernel.transformers import LigerCrossEntropyLoss, apply_liger_kernel_to_llama
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.models.llama import modeling_llama

    cfg = LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    gen = torch.Generator().manual_seed(0)
    torch_model = _seeded(LlamaForCausalLM, cfg).to(device)
    liger_model = copy.deepcopy(torch_model)
    ids = torch.randint(0, cfg.vocab_size, (1, 32), generator=gen).to(device)
    targets = ids[0, 1:]

    def step(model: Any, ce: Any) -> tuple[float, Any]:
        logits = model(input_ids=ids).logits[0, :-1].float()
        loss = ce(logits, targets)
        loss.backward()
        grads = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
        return float(loss.detach()), grads

    want, want_g = step(torch_model, torch.nn.CrossEntropyLoss())
    saved = {k: getattr(modeling_llama, k) for k in _LLAMA_GLOBALS if hasattr(modeling_llama, k)}
    try:
        apply_liger_kernel_to_llama(
            rope=True,
            rms_norm=True,
            swiglu=True,
            cross_entropy=False,
            fused_linear_cross_entropy=False,
            model=liger_model,
        )
        got, got_g = step(liger_model, LigerCrossEntropyLoss())
    finally:  # Liger also patches transformers' Llama module globally: undo that here
        vars(modeling_llama).update(saved)
    if not abs(got - want) <= LIGER_TOL * max(abs(want), 1e-6):
        return f"one step through Liger's kernels gave loss {got:.6g}, PyTorch's {want:.6g}"
    if got_g.shape != want_g.shape:
        return "one step through Liger's kernels left other parameters without gradients"
    rel = float((got_g - want_g).norm() / want_g.norm().clamp_min(1e-12))
    if not rel <= LIGER_TOL:
        return f"one step through Liger's kernels gave gradients {rel:.2g} (relative) off PyTorch's"
    return None


#: what ``apply_liger_kernel_to_llama`` replaces in transformers' Llama module
_LLAMA_GLOBALS = ("apply_rotary_pos_emb", "LlamaRMSNorm", "LlamaMLP", "LlamaForCausalLM")


def _seeded(cls: Any, cfg: Any) -> Any:
    import torch

    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(0)
        return cls(cfg).float()
    finally:
        torch.random.set_rng_state(state)


def forget() -> None:
    """Drop the kept answers (tests that change what is installed)."""
    _cache.clear()


__all__ = ["LIGER_TOL", "flash_attn_problem", "forget", "installed", "liger_problem"]
