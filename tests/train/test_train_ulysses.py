"""DeepSpeed Ulysses sequence parallelism on CPU ranks (gloo, DeepSpeed's CPU accelerator),
launched the way a user launches it: ``configs/accelerate/ulysses.yaml`` with ``--num_processes``
and ``--parallelism_config_sp_*`` flags on the tiny recipe, sorted batches of one sequence.

- sp=2 on 2 ranks trains like one process, and dp=2 x sp=2 on 4 ranks like plain dp=2 (ZeRO-3,
  2 ranks): per-step losses and grad norms within 1e-3 (relative);
- each rank's model receives its slice of every row, not the whole row (train_info.json's
  ``input_positions_per_rank``, counted at the input embedding);
- the attention named at launch is the one the model uses (no ``--model.attn_implementation``
  needed), and a recipe that names another is one line before any model loads;
- LoRA under Ulysses trains like LoRA in one process (dropout 0: each rank draws its own
  dropout masks over its slice, so with dropout the runs agree only in distribution).

Fast checks of the same rules (no launch) are at the end."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chunkwise.errors import BadInput, MissingDependency
from chunkwise.train.engine import check_ulysses, launch_env

REPO = Path(__file__).resolve().parents[2]
ACCELERATE = Path(sys.executable).with_name("accelerate")
RECIPE = REPO / "recipes" / "tiny" / "pyramid_align-mapreduce.yaml"
FIXTURE = REPO / "tests" / "fixtures" / "train" / "pyramid_align.jsonl"
CONFIGS = REPO / "configs" / "accelerate"
STEPS = 2
#: relative tolerance on losses and grad norms (measured: equal to ~1e-6 on 2 CPU ranks)
TOL = 1e-3

COMMON = [
    str(RECIPE),
    f"--train.max_steps={STEPS}",
    f"--data.paths=[{FIXTURE}]",
    "--data.limit=8",
    "--batching.strategy=sorted",
    "--batching.batch_size=1",
    "--wandb.mode=disabled",
]
LORA = [
    "--model.lora.enabled=true",
    "--model.lora.r=4",
    "--model.lora.dropout=0",
    "--model.lora.target_modules=[q_proj,v_proj]",
]
ENV = {
    "DS_ACCELERATOR": "cpu",
    "WANDB_MODE": "disabled",
    "OMP_NUM_THREADS": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "CUDA_VISIBLE_DEVICES": "",
}


def ulysses(n: int, sp: int, dp_shard: int = 1) -> list[str]:
    """accelerate launch with ulysses.yaml on ``n`` CPU ranks, sp x dp_shard of them."""
    return [
        str(ACCELERATE),
        "launch",
        "--config_file",
        str(CONFIGS / "ulysses.yaml"),
        "--num_processes",
        str(n),
        "--parallelism_config_sp_size",
        str(sp),
        "--parallelism_config_dp_shard_size",
        str(dp_shard),
        "--parallelism_config_sp_attn_implementation",
        "sdpa",
        "--mixed_precision",
        "no",
        "--main_process_port",
        "0",
        str(REPO / "train" / "sft.py"),
    ]


def zero3(n: int) -> list[str]:
    return [
        str(ACCELERATE),
        "launch",
        "--config_file",
        str(CONFIGS / "zero3.yaml"),
        "--num_processes",
        str(n),
        "--mixed_precision",
        "no",
        "--main_process_port",
        "0",
        str(REPO / "train" / "sft.py"),
    ]


ONE = [sys.executable, str(REPO / "train" / "sft.py")]

RUNS = {
    "one": (ONE, []),
    "sp2": (ulysses(2, 2), []),
    "dp2": (zero3(2), []),
    "dp2sp2": (ulysses(4, 2, dp_shard=2), []),
    "one-lora": (ONE, LORA),
    "sp2-lora": (ulysses(2, 2), LORA),
}


def launch(cmd: list[str], out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*cmd, *COMMON, f"--output_dir={out}", *extra],
        env={**os.environ, **ENV},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )


class Runs:
    def __init__(self, root: Path):
        self.root, self.done, self.seconds = root, {}, {}

    def get(self, name: str) -> dict:
        if name not in self.done:
            cmd, extra = RUNS[name]
            out = self.root / name
            t0 = time.perf_counter()
            proc = launch(cmd, out, *extra)
            self.seconds[name] = round(time.perf_counter() - t0, 1)
            assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
            info = json.loads((out / "train_info.json").read_text())
            rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
            assert [r["step"] for r in rows] == list(range(1, STEPS + 1))
            self.done[name] = {"info": info, "rows": rows}
        return self.done[name]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    r = Runs(tmp_path_factory.mktemp("ulysses"))
    yield r
    print("\nlaunch seconds:", json.dumps(r.seconds))


def curve(run: dict) -> dict[str, list[float]]:
    return {
        "loss": [r["train/loss"] for r in run["rows"]],
        "grad_norm": [r["train/grad_norm"] for r in run["rows"]],
    }


def assert_same_curves(got: dict, want: dict, what: str) -> None:
    a, b = curve(got), curve(want)
    print(f"\n{what}: {json.dumps({'got': a, 'want': b})}")
    for key in ("loss", "grad_norm"):
        assert a[key] == pytest.approx(b[key], rel=TOL), (what, key, a[key], b[key])


needs_deepspeed = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="deepspeed not installed"
)


@pytest.mark.slow
@needs_deepspeed
def test_sp2_on_two_ranks_trains_like_one_process(runs):
    sp, one = runs.get("sp2"), runs.get("one")
    info = sp["info"]
    assert info["world_size"] == 2 and info["sp_size"] == 2
    assert info["engine"] == "deepspeed-zero3"
    assert_same_curves(sp, one, "sp2 vs one process")


@pytest.mark.slow
@needs_deepspeed
def test_each_sp_rank_receives_its_half_of_every_row(runs):
    sp, one = runs.get("sp2"), runs.get("one")
    whole = one["info"]["input_positions_per_rank"]
    assert len(whole) == 1
    tokens = sum(r["train/tokens"] for r in one["rows"])
    assert whole[0] == tokens  # one process, batch of one, no padding: every position once
    halves = sp["info"]["input_positions_per_rank"]
    assert len(halves) == 2 and halves[0] == halves[1]
    # each row padded to a multiple of sp (at most 1 position per row here), then cut in two
    assert tokens <= sum(halves) <= tokens + STEPS, (halves, tokens)


@pytest.mark.slow
@needs_deepspeed
def test_dp2_sp2_on_four_ranks_trains_like_dp2(runs):
    four, dp2 = runs.get("dp2sp2"), runs.get("dp2")
    info = four["info"]
    assert info["world_size"] == 4 and info["sp_size"] == 2
    assert dp2["info"]["world_size"] == 2 and dp2["info"]["sp_size"] == 1
    assert_same_curves(four, dp2, "dp2 x sp2 (4 ranks) vs dp2")
    # ranks (0, 1) hold halves of data-parallel rank 0's rows, (2, 3) of rank 1's
    p = info["input_positions_per_rank"]
    whole = dp2["info"]["input_positions_per_rank"]
    assert p[0] == p[1] and p[2] == p[3], p
    for half, full in ((p[0], whole[0]), (p[2], whole[1])):
        assert full <= 2 * half <= full + STEPS, (p, whole)


@pytest.mark.slow
@needs_deepspeed
def test_lora_under_ulysses_trains_like_lora_in_one_process(runs):
    sp, one = runs.get("sp2-lora"), runs.get("one-lora")
    assert sp["info"]["trainable_params"] == one["info"]["trainable_params"]
    assert sp["info"]["trainable_params"] < sp["info"]["params"] / 10
    assert_same_curves(sp, one, "LoRA: sp2 vs one process")


@pytest.mark.slow
@needs_deepspeed
def test_a_recipe_naming_another_attention_is_one_line_before_the_model(tmp_path):
    proc = launch(ulysses(2, 2), tmp_path / "out", "--model.attn_implementation=chunkwise_varlen")
    log = proc.stdout + proc.stderr
    assert proc.returncode != 0
    lines = [x for x in log.splitlines() if x.startswith("train: error:")]
    # every rank meets the error, but the launcher stops the others once the first rank exits,
    # so a slower rank may be gone before it writes: at least one line, and all of them alike
    assert lines and len(set(lines)) == 1, log[-3000:]
    assert "--model.attn_implementation=sdpa" in lines[0]
    # neither DeepSpeed's ValueError nor a traceback through chunkwise (the launcher still
    # reports the ranks' exit status in its own words)
    assert "core_attn_implementation" not in log
    frames = [x for x in log.splitlines() if x.strip().startswith('File "')]
    assert not [f for f in frames if "chunkwise/train/" in f or "train/sft.py" in f], frames
    assert " training " not in log  # stopped before the model was built


# ---- the same rules without a launch --------------------------------------------------------


def env_of(sp: int, attn: str | None) -> dict[str, str]:
    env = launch_env(CONFIGS / "ulysses.yaml", 8)
    env["PARALLELISM_CONFIG_SP_SIZE"] = str(sp)
    if attn is None:
        env.pop("PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION", None)
    else:
        env["PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION"] = attn
    return env


def test_check_ulysses_gives_the_launch_attention_to_an_auto_recipe():
    assert check_ulysses(env_of(2, "sdpa"), cuda=False, flash_attn=False) == "sdpa"
    assert check_ulysses(env_of(2, "sdpa"), cuda=False, flash_attn=False, model_attn="sdpa")
    assert check_ulysses(env_of(1, "sdpa"), cuda=False, flash_attn=False) is None
    fa = env_of(2, "flash_attention_2")
    assert check_ulysses(fa, cuda=True, flash_attn=True) == "flash_attention_2"
    with pytest.raises(MissingDependency, match="flash-attn"):
        check_ulysses(fa, cuda=False, flash_attn=False)


def test_check_ulysses_refuses_what_would_fail_or_be_wrong_later():
    with pytest.raises(BadInput, match="--model.attn_implementation=sdpa"):
        check_ulysses(env_of(2, "sdpa"), cuda=False, flash_attn=False, model_attn="eager")
    with pytest.raises(BadInput, match="--parallelism_config_sp_attn_implementation sdpa"):
        check_ulysses(env_of(2, None), cuda=False, flash_attn=False)
    with pytest.raises(BadInput, match="packed.*--batching.strategy=sorted"):
        check_ulysses(env_of(2, "sdpa"), cuda=False, flash_attn=False, packed=True)
    # flash attention keeps packed rows apart (it reads the positions): packing is fine there
    check_ulysses(env_of(2, "flash_attention_2"), cuda=True, flash_attn=True, packed=True)
