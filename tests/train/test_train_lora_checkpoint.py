"""A LoRA run's step checkpoint holds what trains (the trainable weights, optimizer and RNG
states), not the frozen base; it resumes onto the same losses and loads as a model (base +
adapter) equal to the final save. A full fine-tuning step checkpoint loads with the run's
config and tokenizer. (Tiny random Llama, one process; a few seconds each.)"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from lora_checkpoints import next_token_logits, step_dir

from chunkwise.errors import BadInput
from chunkwise.llm.step_checkpoint import FULL_FILE, MODEL_FILES, TRAINABLE_FILE
from chunkwise.train.loop import run
from chunkwise.train.recipe import load_recipe
from chunkwise.train.saving import checkpoint_files

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "recipes" / "tiny"
FIXTURES = REPO / "tests" / "fixtures" / "train"

LORA = (
    "--model.lora.enabled=true",
    "--model.lora.r=4",
    "--model.lora.target_modules=[q_proj,v_proj]",
)
SHORT = (
    "--train.max_steps=4",
    "--train.save_steps=2",
    "--train.save_total_limit=0",
    "--batching.max_tokens=1024",
    "--data.max_length=1024",
)


def tiny(out: Path, *overrides: str):
    return load_recipe(
        TINY / "pyramid_align-standard.yaml",
        [
            f"--output_dir={out}",
            f"--data.paths=[{FIXTURES / 'pyramid_align.jsonl'}]",
            "--wandb.mode=disabled",
            *overrides,
        ],
    )


def losses(out: Path) -> dict[int, float]:
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return {m["step"]: m["train/loss"] for m in rows}


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(autouse=True)
def _cwd(monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("WANDB_MODE", "disabled")


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("lora") / "run"
    summary = run(tiny(out, *LORA, *SHORT))
    return out, summary


def test_lora_step_checkpoint_holds_only_the_trainable_weights(lora_run):
    from safetensors import safe_open

    out, summary = lora_run
    folder = step_dir(out, 2)
    files = checkpoint_files(folder)
    assert TRAINABLE_FILE in files and FULL_FILE not in files, files
    with safe_open(str(folder / TRAINABLE_FILE), "pt") as f:
        names = list(f.keys())
        numel = sum(math.prod(f.get_slice(n).get_shape()) for n in names)
    assert all("lora_" in n for n in names), names[:5]
    assert numel == summary["trainable_params"]
    # weights, two Adam moments (fp32) and RNG / sampler state: nowhere near the base
    size = sum((folder / n).stat().st_size for n in files)
    assert size <= 3 * 4 * summary["trainable_params"] + 64_000, size
    assert size < 4 * (summary["params"] - summary["trainable_params"]) / 2
    # the resume check covers what is saved
    state = json.loads((folder / "trainer_state.json").read_text())
    assert sorted(state["files_sha256"]) == files
    # what the checkpoint loads with, once per run
    assert (out / "checkpoints" / MODEL_FILES / "adapter_config.json").is_file()


def test_lora_stopped_run_resumes_onto_the_same_losses(lora_run, tmp_path):
    out, _ = lora_run
    ref = losses(out)
    assert sorted(ref) == [1, 2, 3, 4]
    stopped = tmp_path / "stopped"  # as if killed after step 3: checkpoint 2, no final save
    shutil.copytree(out, stopped)
    shutil.rmtree(step_dir(stopped, 4))
    (stopped / "train_info.json").unlink()
    resumed = run(tiny(stopped, *LORA, *SHORT))
    assert resumed["resumed_from"] == 2
    assert resumed["losses"] == pytest.approx([ref[3], ref[4]], rel=1e-5, abs=1e-6)


def test_lora_step_checkpoint_loads_as_base_plus_adapter(lora_run):
    import torch

    out, _ = lora_run
    final = next_token_logits(str(out))
    last = next_token_logits(str(step_dir(out, 4)))
    torch.testing.assert_close(last, final)  # the last step's checkpoint is the final model
    base, step2 = next_token_logits(str(out / "base")), next_token_logits(str(step_dir(out, 2)))
    assert (step2 - base).abs().max() > 1e-3  # the adapter was applied
    assert (step2 - final).abs().max() > 1e-3  # and it is step 2's, not the last


def test_full_step_checkpoint_loads_with_the_runs_config_and_tokenizer(tmp_path):
    import torch

    out = tmp_path / "full"
    run(tiny(out, *SHORT, "--train.max_steps=2"))
    folder = step_dir(out, 2)
    assert FULL_FILE in checkpoint_files(folder)
    torch.testing.assert_close(next_token_logits(str(folder)), next_token_logits(str(out)))
    shutil.rmtree(out / "checkpoints" / MODEL_FILES)  # a run of an older chunkwise
    with pytest.raises(BadInput, match="evaluate the run's final model"):
        next_token_logits(str(folder))


def test_a_rerun_with_lora_replaces_the_model_files(tmp_path):
    """The same output_dir trained again from scratch (resume=never) with LoRA: its step
    checkpoints load as base + adapter, not with the first run's full-model files."""
    out = tmp_path / "again"
    run(tiny(out, *SHORT, "--train.max_steps=2"))
    assert (out / "checkpoints" / MODEL_FILES / "config.json").is_file()
    run(tiny(out, *SHORT, *LORA, "--train.max_steps=2", "--train.resume=never"))
    files = out / "checkpoints" / MODEL_FILES
    assert (files / "adapter_config.json").is_file() and not (files / "config.json").exists()
    assert TRAINABLE_FILE in checkpoint_files(step_dir(out, 2))
    next_token_logits(str(step_dir(out, 2)))
