"""What the ranks of one launch must share and agree on (#50 item 4), on 2 CPU ranks (gloo):

- an ``output_dir`` the ranks do not share (rank 1 pointed at another folder, as a node with its
  own disk would be) is refused with one line on every rank, before any model loads;
- a checkpoint records the world size, engine and sp degree, and a resume under another world
  size is refused naming both;
- ``train.timeout_minutes`` is the timeout of the process group the ranks really run with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from chunkwise.errors import BadInput
from chunkwise.train.loop import RANK_DIR_ENV
from chunkwise.train.multinode import TOKEN_PREFIX, check_resume_layout, layout_of
from chunkwise.train.recipe import load_recipe
from two_ranks import ACCELERATE, accelerate_launch, free_port

REPO = Path(__file__).resolve().parents[2]
RECIPE = REPO / "recipes" / "tiny" / "longalign-standard.yaml"
FIXTURE = REPO / "tests" / "fixtures" / "train" / "longalign.jsonl"
COMMON = [
    str(RECIPE),
    f"--data.paths=[{FIXTURE}]",
    "--data.limit=12",
    "--data.max_length=512",
    "--batching.max_tokens=512",
    "--wandb.mode=disabled",
    "--train.save_steps=2",
]
ENV = {
    "WANDB_MODE": "disabled",
    "OMP_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "CUDA_VISIBLE_DEVICES": "",
}
SFT = str(REPO / "train" / "sft.py")
two_ranks = pytest.mark.skipif(not ACCELERATE.exists(), reason="accelerate CLI not installed")


def run(cmd: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        cmd,
        env={**os.environ, **ENV, **env},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


def errors(proc: subprocess.CompletedProcess) -> list[str]:
    return [x for x in proc.stderr.splitlines() if x.startswith("train: error:")]


@pytest.mark.slow
@two_ranks
def test_an_output_dir_the_ranks_do_not_share_is_refused_on_every_rank(tmp_path):
    out, elsewhere = tmp_path / "shared", tmp_path / "node1-disk"
    cmd = accelerate_launch(SFT, *COMMON, "--train.max_steps=2", f"--output_dir={out}")
    proc = run(cmd, **{RANK_DIR_ENV: f"1={elsewhere}"})
    assert proc.returncode != 0
    lines = errors(proc)
    # every rank refuses (the check is collective), but the launcher stops the others once the
    # first exits, so a slower rank may be gone before it writes: one line at least, all alike
    assert lines and len(set(lines)) == 1, (proc.stdout + proc.stderr)[-3000:]
    assert "is not shared by every rank" in lines[0] and "rank 1 (of 2)" in lines[0]
    assert " training " not in proc.stdout + proc.stderr  # before any model was built
    assert not (out / "checkpoints").exists()
    # the ranks took their tokens away again
    assert not list(out.glob(TOKEN_PREFIX + "*")) and not list(elsewhere.glob(TOKEN_PREFIX + "*"))


@pytest.mark.slow
@two_ranks
def test_checkpoint_records_the_layout_and_a_resume_on_another_world_size_is_refused(tmp_path):
    out = tmp_path / "run"
    cmd = accelerate_launch(
        SFT,
        *COMMON,
        "--train.max_steps=2",
        "--train.timeout_minutes=47",
        f"--output_dir={out}",
        port=free_port(),
    )
    first = run(cmd)
    assert first.returncode == 0, (first.stdout + first.stderr)[-3000:]
    info = json.loads((out / "train_info.json").read_text())
    assert info["world_size"] == 2 and info["engine"] == "ddp"
    # the process group the ranks ran in waited 47 minutes, not gloo's default 30
    assert info["process_group_timeout_s"] == 47 * 60
    state = json.loads((out / "checkpoints" / "step-00000002" / "trainer_state.json").read_text())
    assert (state["world_size"], state["engine"], state["sp_size"]) == (2, "ddp", 1)

    one = run([sys.executable, SFT, *COMMON, "--train.max_steps=3", f"--output_dir={out}"])
    assert one.returncode == 2, (one.stdout + one.stderr)[-3000:]
    [line] = errors(one)
    assert "step-00000002 was written by 2 processes (ddp, sp 1)" in line
    assert "this launch has 1 process (single, sp 1)" in line
    assert "--num_processes 2" in line
    assert " training " not in one.stdout + one.stderr
    assert [json.loads(x)["step"] for x in (out / "metrics.jsonl").read_text().splitlines()] == [
        1,
        2,
    ]


# ---- without a launch -----------------------------------------------------------------------


def test_resume_layout_must_match_the_checkpoints():
    folder = Path("out/checkpoints/step-00000010")
    saved = {"step": 10, **layout_of(8, "deepspeed-zero3", 1)}
    check_resume_layout(saved, folder, layout_of(8, "deepspeed-zero3", 1))
    for now in (
        layout_of(16, "deepspeed-zero3", 1),
        layout_of(8, "fsdp2", 1),
        layout_of(8, "deepspeed-zero3", 2),
    ):
        with pytest.raises(BadInput, match=r"written by 8 processes \(deepspeed-zero3, sp 1\)"):
            check_resume_layout(saved, folder, now)
    # a checkpoint of an older chunkwise records none: nothing to compare
    check_resume_layout({"step": 10}, folder, layout_of(16, "ddp", 1))


def test_timeout_minutes_is_a_checked_recipe_key():
    r = load_recipe(RECIPE, [f"--data.paths=[{FIXTURE}]"], check_paths=False)
    assert r.train.timeout_minutes >= 60  # rank 0 tokenizes while the others wait
    with pytest.raises(BadInput, match="train.timeout_minutes.*a number > 0"):
        load_recipe(RECIPE, ["--train.timeout_minutes=0"], check_paths=False)
