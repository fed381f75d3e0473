"""The output folder a training run writes into (#47 item 8): a folder chunkwise train did not
make (a model's own folder) is refused before anything is written; a folder in use by another
run is refused with a clear message (two real processes); the lock is freed when its holder is
killed with SIGKILL, and the killed run then resumes. Under a multi-process launch the ranks of
one launch share their main process's lock and every rank of a second launch is refused."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chunkwise.errors import BadInput
from chunkwise.run_folders import FolderLock, check_run_folder
from chunkwise.train.loop import HOLD_ENV, main, run
from chunkwise.train.recipe import load_recipe
from chunkwise.train.saving import LOCK_FILE, TRAIN_MARKER
from two_ranks import ACCELERATE, accelerate_launch

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "longalign-standard.yaml"
FIXTURE = REPO / "tests" / "fixtures" / "train" / "longalign.jsonl"
CHUNKWISE = Path(sys.executable).with_name("chunkwise")

COMMON = [
    f"--data.paths=[{FIXTURE}]",
    "--data.limit=12",
    "--data.max_length=512",
    "--batching.max_tokens=512",
    "--wandb.mode=disabled",
    "--train.max_steps=2",
    "--train.save_steps=1",
]
ENV = {
    "WANDB_MODE": "disabled",
    "OMP_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "CUDA_VISIBLE_DEVICES": "",
}


def recipe(out: Path, *extra: str):
    return load_recipe(RECIPE, [f"--output_dir={out}", *COMMON, *extra])


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    import torch

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("WANDB_MODE", "disabled")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def test_a_model_folder_is_refused_before_anything_is_written(tiny_llama, tmp_path, capsys):
    out = tmp_path / "model"
    shutil.copytree(tiny_llama, out)
    assert (out / "config.json").is_file() and (out / "model.safetensors").is_file()
    before = snapshot(out)
    with pytest.raises(BadInput, match="already holds files that chunkwise train did not write"):
        run(recipe(out))
    assert snapshot(out) == before  # same files, same bytes, nothing added (no lock, no marker)
    assert sorted(p.name for p in out.iterdir()) == sorted(before)
    # the entry prints it as one line and exits 2
    assert main([str(RECIPE), f"--output_dir={out}", *COMMON]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"train: error: output_dir {out} already holds files")
    assert snapshot(out) == before


def test_the_base_models_own_run_folder_is_refused(tmp_path):
    """A run folder chunkwise made, given as both the base model and the output: refused."""
    first = tmp_path / "first"
    run(recipe(first))
    before = snapshot(first)
    again = recipe(
        first,
        f"--model.name_or_path={first}",
        "--model.init=pretrained",
        f"--model.tokenizer={first}",
    )
    with pytest.raises(BadInput, match=r"output_dir .*first is the folder of model\.name_or_path"):
        run(again)
    assert snapshot(first) == before


def test_a_run_folder_of_its_own_resumes_and_an_empty_folder_is_taken(tmp_path):
    out = tmp_path / "run"
    out.mkdir()  # empty: fine
    assert run(recipe(out))["resumed_from"] == 0
    assert json.loads((out / TRAIN_MARKER).read_text())["made_by"] == "chunkwise train"
    assert run(recipe(out, "--train.max_steps=3"))["resumed_from"] == 2
    legacy = tmp_path / "legacy"  # a run folder of an older chunkwise: no marker, a recipe.yaml
    legacy.mkdir()
    (legacy / "recipe.yaml").write_text("run_name: x\n")
    assert check_run_folder(legacy, (TRAIN_MARKER, "recipe.yaml"), made_by="x", option="o")


def test_folder_lock_is_exclusive_and_names_the_holder(tmp_path):
    held = rf"in use by another chunkwise train run \(pid {os.getpid()}"
    with (
        FolderLock(tmp_path, LOCK_FILE, what="chunkwise train run"),
        pytest.raises(BadInput, match=held),
    ):
        FolderLock(tmp_path, LOCK_FILE, what="chunkwise train run")
    FolderLock(tmp_path, LOCK_FILE, what="chunkwise train run").release()  # free again


def _wait_for(path: Path, proc: subprocess.Popen, what: str, timeout: float = 300) -> None:
    """Poll the filesystem until ``path`` exists (the holding run reached its checkpoint)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"{what} ended (rc {proc.returncode}) first: {out[-3000:]}")
        assert time.monotonic() < deadline, f"{what}: no {path} within {timeout} s"
        time.sleep(0.2)


def _hold(cmd: list[str], out: Path) -> subprocess.Popen:
    """Start ``cmd`` (a run that checkpoints step 1, then waits to be killed) and wait for it."""
    proc = subprocess.Popen(
        cmd,
        env={**os.environ, **ENV, HOLD_ENV: "1"},
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    _wait_for(out / "checkpoints" / "step-00000001" / "trainer_state.json", proc, "the first run")
    return proc


def _kill(proc: subprocess.Popen, out: Path) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for proc_dir in Path("/proc").iterdir():  # launcher ranks can outlive its process group
        if proc_dir.name.isdigit():
            with contextlib.suppress(OSError):
                if str(out) in (proc_dir / "cmdline").read_bytes().decode(errors="replace"):
                    os.kill(int(proc_dir.name), signal.SIGKILL)


def _chunkwise_train(out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(CHUNKWISE), "train", str(RECIPE), f"--output_dir={out}", *COMMON],
        env={**os.environ, **ENV},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_second_run_on_a_folder_in_use_is_refused_and_kill_9_frees_it(tmp_path):
    out = tmp_path / "run"
    first = _hold(
        [
            sys.executable,
            str(REPO / "train" / "sft.py"),
            str(RECIPE),
            f"--output_dir={out}",
            *COMMON,
        ],
        out,
    )
    try:
        ckpt = out / "checkpoints" / "step-00000001"
        before = snapshot(ckpt)
        second = _chunkwise_train(out)
        assert second.returncode == 2, second.stderr[-3000:]
        errors = [ln for ln in second.stderr.splitlines() if "error:" in ln]
        assert len(errors) == 1 and "Traceback" not in second.stderr, second.stderr[-3000:]
        assert f"{out} is in use by another chunkwise train run (pid {first.pid}" in errors[0]
        assert snapshot(ckpt) == before  # the second run touched nothing of the first
        assert not (out / "checkpoints" / "step-00000001.tmp").exists()
    finally:
        _kill(first, out)
    assert first.returncode == -signal.SIGKILL
    third = _chunkwise_train(out)  # the kernel freed the lock: the killed run resumes
    assert third.returncode == 0, third.stderr[-3000:]
    info = json.loads((out / "train_info.json").read_text())
    assert info["resumed_from"] == 1 and info["steps"] == 2


def _launch(out: Path) -> list[str]:
    return accelerate_launch(
        str(REPO / "train" / "sft.py"), str(RECIPE), f"--output_dir={out}", *COMMON
    )


@pytest.mark.slow
@pytest.mark.skipif(not ACCELERATE.exists(), reason="accelerate CLI not installed")
def test_ranks_of_one_launch_share_the_lock_and_a_second_launch_is_refused(tmp_path):
    out = tmp_path / "run"
    first = _hold(_launch(out), out)  # both ranks ran a step under rank 0's lock
    try:
        second = subprocess.run(
            _launch(out),
            env={**os.environ, **ENV},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert second.returncode != 0
        # both ranks said so, neither hung (counted in the text: two ranks' lines may interleave)
        assert second.stderr.count("is in use by another") == 2, second.stderr[-4000:]
    finally:
        _kill(first, out)
    third = subprocess.run(
        _launch(out),
        env={**os.environ, **ENV},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert third.returncode == 0, third.stderr[-4000:]
    info = json.loads((out / "train_info.json").read_text())
    assert info["resumed_from"] == 1 and info["world_size"] == 2
