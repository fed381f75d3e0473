"""A LoRA run's step checkpoint on 2 CPU ranks (DDP, and DeepSpeed through DS_ACCELERATOR=cpu;
gloo) holds what trains: DDP saves ``trainable.safetensors`` (accelerate's state hooks), and
DeepSpeed's ``save_checkpoint(exclude_frozen_parameters=True)`` leaves the frozen base out
(ZeRO-2 would otherwise write it whole into mp_rank_00_model_states.pt; under ZeRO-3 every
rank's partition of it). DDP and ZeRO-3 runs stopped after their step-2 checkpoint resume onto
the same losses, and a ZeRO-3 step checkpoint loads for evaluation as base + adapter
(DeepSpeed's zero_to_fp32 gathers the trainable weights) equal to the final save."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lora_checkpoints import launch, losses, next_token_logits, step_dir

pytest.importorskip("deepspeed")

pytestmark = pytest.mark.slow


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def assert_holds_what_trains(out: Path, info: dict) -> None:
    """No frozen weight in any file of the step checkpoint, and the whole folder within what
    the trainable weights, their fp32 copy and two Adam moments take (plus pickling)."""
    import torch

    folder = step_dir(out, 2)
    trainable, frozen = info["trainable_params"], info["params"] - info["trainable_params"]
    for f in folder.rglob("*model_states.pt"):
        sd = torch.load(f, map_location="cpu", weights_only=False)
        module = sd.get("module") or {}
        assert all("lora_" in k for k in module), [k for k in module if "lora_" not in k][:3]
        assert not sd.get("frozen_param_fragments")
    size = folder_bytes(folder)
    assert size <= 2 * 4 * 4 * trainable + 200_000, size
    assert size < 4 * frozen / 4, (size, frozen)


@pytest.fixture(scope="module")
def zero3(tmp_path_factory):
    out = tmp_path_factory.mktemp("zero3") / "run"
    return out, launch("zero3", out)


def test_zero2_lora_checkpoint_leaves_the_base_out(tmp_path):
    out = tmp_path / "zero2"
    assert_holds_what_trains(out, launch("zero2", out))


def test_zero3_lora_checkpoint_leaves_the_base_out(zero3):
    assert_holds_what_trains(*zero3)


def test_zero3_lora_stopped_run_resumes_onto_the_same_losses(zero3, tmp_path):
    stop_after_step_2_and_resume("zero3", zero3[0], tmp_path / "stopped")


def stop_after_step_2_and_resume(config: str, out: Path, stopped: Path) -> None:
    """A copy of a finished 4-step run as if killed after step 3 (checkpoint 2, no final
    save), resumed: steps 3 and 4 give the uninterrupted run's losses."""
    ref = losses(out)
    shutil.copytree(out, stopped)
    shutil.rmtree(step_dir(stopped, 4))
    (stopped / "train_info.json").unlink()
    info = launch(config, stopped)
    assert info["resumed_from"] == 2
    got = losses(stopped)
    assert [got[3], got[4]] == pytest.approx([ref[3], ref[4]], rel=1e-5, abs=1e-6)


def test_ddp_lora_checkpoint_holds_what_trains_and_resumes(tmp_path):
    from chunkwise.train.saving import checkpoint_files

    out = tmp_path / "ddp"
    info = launch("ddp", out)
    assert info["engine"] == "ddp" and info["world_size"] == 2
    files = checkpoint_files(step_dir(out, 2))
    assert "trainable.safetensors" in files and "model.safetensors" not in files, files
    assert folder_bytes(step_dir(out, 2)) <= 3 * 4 * info["trainable_params"] + 200_000
    stop_after_step_2_and_resume("ddp", out, tmp_path / "stopped")


def test_zero3_full_step_checkpoint_loads_for_evaluation(tmp_path):
    """Full fine-tuning under ZeRO-3: the step checkpoint's partitioned weights, gathered by
    zero_to_fp32 onto the run's config, are the final save's."""
    import torch

    out = tmp_path / "full"
    launch("zero3", out, lora=False)
    torch.testing.assert_close(
        next_token_logits(str(step_dir(out, 4))), next_token_logits(str(out))
    )
    assert (
        next_token_logits(str(step_dir(out, 2))) - next_token_logits(str(out))
    ).abs().max() > 1e-4


def test_zero3_lora_step_checkpoint_loads_as_base_plus_adapter(zero3):
    import torch

    out, _ = zero3
    torch.testing.assert_close(
        next_token_logits(str(step_dir(out, 4))), next_token_logits(str(out))
    )
    assert (
        next_token_logits(str(step_dir(out, 2))) - next_token_logits(str(out))
    ).abs().max() > 1e-4
