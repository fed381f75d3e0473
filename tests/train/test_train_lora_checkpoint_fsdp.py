"""A LoRA run's step checkpoint under FSDP2 on 2 CPU ranks (gloo) holds what trains: the
trainable weights' shards (``trainable_fsdp/``, torch.distributed.checkpoint of
``get_model_state_dict(ignore_frozen_params=True)``), the sharded optimizer state and the RNG
states, not the frozen base (accelerate's own FSDP save writes every weight). A run stopped after
its step-2 checkpoint resumes onto the same losses, and a step checkpoint loads for evaluation
as base + adapter, the last one equal to the final save."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lora_checkpoints import launch, losses, next_token_logits, step_dir

pytestmark = pytest.mark.slow


def launch_fsdp2(out: Path) -> dict:
    info = launch("fsdp2", out)
    assert info["engine"] == "fsdp2" and info["world_size"] == 2, info
    return info


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fsdp2") / "run"
    return out, launch_fsdp2(out)


def test_fsdp2_lora_checkpoint_holds_the_trainable_weights_only(run):
    from chunkwise.llm.step_checkpoint import FSDP_TRAINABLE, read_dcp

    out, info = run
    folder = step_dir(out, 2)
    files = {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}
    assert not any(f.startswith("pytorch_model_fsdp_0/") for f in files), sorted(files)
    for part in (FSDP_TRAINABLE, "optimizer_0"):  # every rank wrote its shard
        assert {f for f in files if f.startswith(part + "/") and "__1_" in f}, sorted(files)
    sd = read_dcp(folder / FSDP_TRAINABLE)
    weights = {k: v for k, v in sd.items() if "lora_" in k}
    assert sum(v.numel() for v in weights.values()) == info["trainable_params"]
    assert len(sd) == len(weights), [k for k in sd if "lora_" not in k][:3]  # no frozen weight
    size = sum((folder / f).stat().st_size for f in files)
    # trainable fp32 weights and two Adam moments, plus metadata and RNG states
    assert size <= 3 * 4 * info["trainable_params"] + 200_000, size
    frozen = info["params"] - info["trainable_params"]
    assert size < 4 * frozen / 4, (size, frozen)  # under a quarter of the fp32 base


def test_fsdp2_lora_stopped_run_resumes_onto_the_same_losses(run, tmp_path):
    out, _ = run
    ref = losses(out)
    stopped = tmp_path / "stopped"
    shutil.copytree(out, stopped)
    shutil.rmtree(step_dir(stopped, 4))
    (stopped / "train_info.json").unlink()
    info = launch_fsdp2(stopped)
    assert info["resumed_from"] == 2
    got = losses(stopped)
    assert [got[3], got[4]] == pytest.approx([ref[3], ref[4]], rel=1e-5, abs=1e-6)


def test_fsdp2_lora_step_checkpoint_loads_as_base_plus_adapter(run):
    import torch

    out, _ = run
    final = next_token_logits(str(out))
    torch.testing.assert_close(next_token_logits(str(step_dir(out, 4))), final)
    assert (next_token_logits(str(step_dir(out, 2))) - final).abs().max() > 1e-4
