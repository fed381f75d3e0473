"""Training bookkeeping (single CPU process, tiny recipe, 2-3 steps): negative step counts are
refused, a rerun of a finished run keeps its final metrics, and the final save is atomic (a
kill while it writes leaves the previous complete save; weights without train_info.json are
detected, reported and saved again)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

import chunkwise.train.saving as saving
from chunkwise.train.loop import FINAL_TMP, incomplete_final, main, run
from chunkwise.train.recipe import load_recipe

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "longalign-standard.yaml"
FIXTURE = REPO / "tests" / "fixtures" / "train" / "longalign.jsonl"


def recipe(out: Path, steps: int):
    return load_recipe(
        RECIPE,
        [
            f"--output_dir={out}",
            f"--data.paths=[{FIXTURE}]",
            "--data.limit=12",
            "--data.max_length=512",
            "--batching.max_tokens=512",
            "--wandb.mode=disabled",
            f"--train.max_steps={steps}",
        ],
    )


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    import torch

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture
def _root_logging():
    """main() points the root logger at this test's (captured) stderr: put it back after."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.mark.usefixtures("_root_logging")
@pytest.mark.parametrize("key", ["train.max_steps", "train.epochs", "train.warmup_steps"])
def test_negative_counts_exit_2(capsys, key):
    assert main([str(RECIPE), f"--{key}=-1"]) == 2
    err = capsys.readouterr().err
    want = f"train: error: --{key}: option {key}='-1' is not valid; expected a whole number >= 0"
    assert err.startswith(want)


def test_rerun_of_a_finished_run_keeps_its_final_metrics(tmp_path):
    out = tmp_path / "run"
    first = run(recipe(out, 2))
    final = json.loads((out / "train_info.json").read_text())["final"]
    assert final["step"] == 2 and final["train/loss"] == first["losses"][-1]
    machine = json.loads((out / "train_info.json").read_text())["machine"]
    assert machine["cpu"] and machine["cpus"] >= 1 and "gpu" in machine  # what trained it
    again = run(recipe(out, 2))
    assert again["resumed_from"] == 2 and again["losses"] == []
    info = json.loads((out / "train_info.json").read_text())
    assert info["final"] == final  # was {} (final_loss: null) before


def test_final_save_is_atomic_and_an_incomplete_one_is_repaired(tmp_path, monkeypatch, caplog):
    out = tmp_path / "run"
    run(recipe(out, 2))
    weights = (out / "model.safetensors").read_bytes()
    info = json.loads((out / "train_info.json").read_text())

    # a kill while the final save writes (here: while writing train_info.json into the temp
    # folder) leaves the previous complete save untouched
    real = saving.atomic_write_json

    def killed(path, data):
        if Path(path).name == "train_info.json":
            raise KeyboardInterrupt
        return real(path, data)

    monkeypatch.setattr(saving, "atomic_write_json", killed)
    with pytest.raises(KeyboardInterrupt):
        run(recipe(out, 3))
    monkeypatch.setattr(saving, "atomic_write_json", real)
    assert (out / FINAL_TMP).is_dir()  # the half-written save stayed in its temp folder
    assert (out / "model.safetensors").read_bytes() == weights
    assert json.loads((out / "train_info.json").read_text()) == info
    assert not incomplete_final(out)

    # weights without train_info.json (a kill between the moves) are detected and re-saved
    (out / "train_info.json").unlink()
    assert incomplete_final(out)
    with caplog.at_level(logging.WARNING, logger="chunkwise.train.loop"):
        again = run(recipe(out, 3))
    assert "no train_info.json" in caplog.text
    assert again["repaired_incomplete_final"] is True
    info = json.loads((out / "train_info.json").read_text())
    assert info["final"]["step"] == 3 and not (out / FINAL_TMP).exists()
    assert not incomplete_final(out)


def test_wandb_resume_rewinds_online_and_skips_logged_steps_offline(tmp_path):
    from chunkwise.train.runinfo import note_wandb_step, wandb_init_kwargs, wandb_logged_step

    r = recipe(tmp_path, 2)
    online = wandb_init_kwargs(r, tmp_path, "abc123", 40, "online")
    assert online["resume_from"] == "abc123?_step=40" and "id" not in online
    fresh = wandb_init_kwargs(r, tmp_path, "abc123", 0, "online")
    assert fresh["id"] == "abc123" and "resume_from" not in fresh
    offline = wandb_init_kwargs(r, tmp_path, "abc123", 40, "offline")
    assert offline["id"] == "abc123" and offline["resume"] == "allow"
    assert wandb_logged_step(tmp_path) == 0
    note_wandb_step(tmp_path, 47)
    assert wandb_logged_step(tmp_path) == 47


def test_stage_weights_are_checked():
    from chunkwise.errors import BadInput

    ok = load_recipe(RECIPE, ["--train.stage_weights={reduce: 4.0}"])
    assert ok.train.stage_weights == {"reduce": 4.0}
    with pytest.raises(BadInput, match="unknown stage 'bogus'"):
        load_recipe(RECIPE, ["--train.stage_weights={bogus: 1.0}"])
    with pytest.raises(BadInput, match=r"stage_weights\.map must be a number >= 0"):
        load_recipe(RECIPE, ["--train.stage_weights={map: -1}"])
