"""GPU-only checks: skipped without CUDA (and without flash-attn / DeepSpeed where they need it)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from chunkwise.train.attention import register
from chunkwise.train.modeling import arch_config

REPO = Path(__file__).resolve().parents[2]
cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
flash = pytest.mark.skipif(
    importlib.util.find_spec("flash_attn") is None, reason="needs flash-attn"
)
deepspeed = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="needs deepspeed"
)


def _packed_logits(attn: str) -> tuple[torch.Tensor, torch.Tensor]:
    from transformers import LlamaForCausalLM

    torch.manual_seed(0)
    cfg = arch_config("tiny", {"hidden_size": 128, "num_attention_heads": 4}, 512)
    model = LlamaForCausalLM._from_config(
        cfg, attn_implementation="sdpa", dtype=torch.bfloat16
    ).cuda()
    lengths = (100, 37, 250)
    seqs = [torch.randint(0, 512, (n,), device="cuda") for n in lengths]
    ref = torch.cat([model(input_ids=s[None]).logits[0] for s in seqs]).float()
    model.config._attn_implementation = attn
    ids = torch.cat(seqs)[None]
    pos = torch.cat([torch.arange(n, device="cuda") for n in lengths])[None]
    return model(input_ids=ids, position_ids=pos, use_cache=False).logits[0].float(), ref


@pytest.mark.gpu
@cuda
@flash
def test_flash_attention_varlen_equals_sdpa_per_sequence():
    packed, ref = _packed_logits("flash_attention_2")
    assert torch.allclose(packed, ref, atol=3e-2, rtol=3e-2)


@pytest.mark.gpu
@cuda
def test_chunkwise_varlen_on_gpu_equals_sdpa_per_sequence():
    packed, ref = _packed_logits(register())
    assert torch.allclose(packed, ref, atol=3e-2, rtol=3e-2)


@pytest.mark.gpu
@cuda
@deepspeed
def test_zero3_step_runs(tmp_path):
    """Three optimizer steps of the tiny recipe under ZeRO-3 on the visible GPUs."""
    n = torch.cuda.device_count()
    cmd = [
        str(Path(sys.executable).with_name("accelerate")),
        "launch",
        "--config_file",
        str(REPO / "configs" / "accelerate" / "zero3.yaml"),
        "--num_processes",
        str(n),
        str(REPO / "train" / "sft.py"),
        str(REPO / "recipes" / "tiny" / "longalign-standard.yaml"),
        f"--output_dir={tmp_path / 'z3'}",
        "--train.max_steps=3",
        "--wandb.mode=disabled",
    ]
    proc = subprocess.run(
        cmd,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "WANDB_MODE": "disabled"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "z3" / "model.safetensors").exists()
