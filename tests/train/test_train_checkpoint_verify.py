"""Checkpoint files are verified before a resume unpickles them (#47 item 16): every save
records the sha256 of each file in trainer_state.json; a file changed, added or removed after
the save is refused with its name, a checkpoint with no digests (an older chunkwise) too, and
``--trust_checkpoint`` resumes anyway. Single CPU process (torch checkpoint) here; a DeepSpeed
ZeRO-2 checkpoint on 2 CPU ranks in the slow test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import chunkwise.train.modeling as modeling
from chunkwise.digests import file_sha256
from chunkwise.errors import BadInput
from chunkwise.train.loop import main, run
from chunkwise.train.recipe import load_recipe
from chunkwise.train.saving import checkpoint_files

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "longalign-standard.yaml"
FIXTURE = REPO / "tests" / "fixtures" / "train" / "longalign.jsonl"
STEP1 = Path("checkpoints") / "step-00000001"
COMMON = [
    f"--data.paths=[{FIXTURE}]",
    "--data.limit=12",
    "--data.max_length=512",
    "--batching.max_tokens=512",
    "--wandb.mode=disabled",
    "--train.save_steps=1",
    "--train.save_total_limit=0",
]


def args(out: Path, steps: int) -> list[str]:
    return [f"--output_dir={out}", *COMMON, f"--train.max_steps={steps}"]


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    import torch

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    """A finished one-step run: its checkpoint step-1 (kept pristine; tests work on copies)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("saved") / "run"
    run(load_recipe(RECIPE, args(out, 1)))
    torch.set_num_threads(n)
    return out


@pytest.fixture
def copy(saved, tmp_path) -> Path:
    import shutil

    out = tmp_path / "run"
    shutil.copytree(saved, out)
    return out


def test_save_records_the_sha256_of_every_checkpoint_file(saved):
    ckpt = saved / STEP1
    state = json.loads((ckpt / "trainer_state.json").read_text())
    names = checkpoint_files(ckpt)
    assert "model.safetensors" in names and "random_states_0.pkl" in names
    assert state["files_sha256"] == {n: file_sha256(ckpt / n) for n in names}


def _resume(out: Path):
    return run(load_recipe(RECIPE, args(out, 2)))


def _no_model(monkeypatch):
    def no_model(*a, **k):
        raise AssertionError("the model was built before the checkpoint was checked")

    monkeypatch.setattr(modeling, "build_model", no_model)


def test_an_unaltered_checkpoint_resumes(copy):
    assert _resume(copy)["resumed_from"] == 1


@pytest.mark.parametrize(
    ("damage", "file", "why"),
    [
        ("append", "model.safetensors", "its sha256 differs"),
        ("flip", "random_states_0.pkl", "its sha256 differs"),
        ("flip", "optimizer.bin", "its sha256 differs"),
        ("add", "custom_checkpoint_0.pkl", "not written by this checkpoint's save"),
        ("remove", "optimizer.bin", "written at save but missing now"),
    ],
)
def test_a_checkpoint_altered_after_save_is_refused_naming_the_file(
    copy, monkeypatch, damage, file, why
):
    path = copy / STEP1 / file
    assert path.exists() == (damage != "add")
    if damage == "append":
        path.write_bytes(path.read_bytes() + b"\0")
    elif damage == "flip":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    elif damage == "add":
        path.write_bytes(b"cos\nsystem\n(S'echo pwned'\ntR.")  # a pickle that would run code
    else:
        path.unlink()
    _no_model(monkeypatch)
    with pytest.raises(BadInput, match=rf"{path}: {why}.*--trust_checkpoint"):
        _resume(copy)


def _strip_digests(out: Path) -> None:
    state_path = out / STEP1 / "trainer_state.json"
    state = json.loads(state_path.read_text())
    del state["files_sha256"]
    state_path.write_text(json.dumps(state))


def test_a_checkpoint_without_digests_needs_trust_checkpoint(copy, monkeypatch, capsys, caplog):
    _strip_digests(copy)
    with monkeypatch.context() as m:
        _no_model(m)
        with pytest.raises(BadInput, match=r"records no sha256 of the checkpoint's files"):
            _resume(copy)
    assert main([str(RECIPE), *args(copy, 2), "--trust_checkpoint"]) == 0
    assert json.loads((copy / "train_info.json").read_text())["resumed_from"] == 1
    assert "without checking its files" in capsys.readouterr().err + caplog.text


def test_trust_checkpoint_through_the_cli(copy, monkeypatch):
    from chunkwise import cli

    _strip_digests(copy)
    assert cli.main(["train", str(RECIPE), *args(copy, 2)]) == 2
    assert cli.main(["train", str(RECIPE), *args(copy, 2), "--trust_checkpoint"]) == 0
    assert json.loads((copy / "train_info.json").read_text())["resumed_from"] == 1


ACCELERATE = Path(sys.executable).with_name("accelerate")


def _zero2(out: Path, steps: int) -> subprocess.CompletedProcess:
    cmd = [
        str(ACCELERATE),
        "launch",
        "--config_file",
        str(REPO / "configs" / "accelerate" / "zero2.yaml"),
        "--num_processes",
        "2",
        "--main_process_port",
        "0",
        str(REPO / "train" / "sft.py"),
        str(RECIPE),
        *args(out, steps),
    ]
    env = {
        **os.environ,
        "DS_ACCELERATOR": "cpu",
        "WANDB_MODE": "disabled",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "CUDA_VISIBLE_DEVICES": "",
    }
    return subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
@pytest.mark.skipif(not ACCELERATE.exists(), reason="accelerate CLI not installed")
def test_a_deepspeed_checkpoint_altered_after_save_is_refused_and_unaltered_resumes(tmp_path):
    pytest.importorskip("deepspeed")
    out = tmp_path / "run"
    first = _zero2(out, 1)
    assert first.returncode == 0, first.stderr[-4000:]
    ckpt = out / STEP1
    optim = sorted(n for n in checkpoint_files(ckpt) if "optim_states" in n)
    assert len(optim) == 2, checkpoint_files(ckpt)  # one ZeRO shard per rank: DeepSpeed ran
    target = ckpt / optim[1]
    good = target.read_bytes()
    target.write_bytes(good + b"\0")  # torch.load(weights_only=False) would read this file
    refused = _zero2(out, 2)
    assert refused.returncode != 0
    lines = [ln for ln in refused.stderr.splitlines() if f"{target}: its sha256 differs" in ln]
    # each rank checks before it loads; the launcher stops the others once the first exits, so
    # one line at least, and no rank got as far as resuming
    assert lines and len(set(lines)) == 1, refused.stderr[-4000:]
    assert "resumed from" not in refused.stdout + refused.stderr
    target.write_bytes(good)
    resumed = _zero2(out, 2)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    info = json.loads((out / "train_info.json").read_text())
    assert info["resumed_from"] == 1 and info["engine"] == "deepspeed-zero2"


def test_an_unreadable_trainer_state_is_one_clear_error(copy, monkeypatch):
    state = copy / STEP1 / "trainer_state.json"
    state.write_text('{"step": 1, "files_sha256": {')
    _no_model(monkeypatch)
    with pytest.raises(BadInput, match=rf"{state}: not valid JSON"):
        _resume(copy)
