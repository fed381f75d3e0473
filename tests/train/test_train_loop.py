"""The training loop end to end on tiny recipes (CPU): loss falls, kill -9 and resume follows the
same loss curve, outputs load in the hf backend (full weights and LoRA adapters), and bad input
fails before a model is built."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from chunkwise.errors import BadInput
from chunkwise.train.loop import KILL_ENV, checkpoints, main, run
from chunkwise.train.recipe import load_recipe

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "recipes" / "tiny"
FIXTURES = REPO / "tests" / "fixtures" / "train"


def tiny(name: str, out: Path, *overrides: str):
    return load_recipe(
        TINY / f"{name}.yaml",
        [
            f"--output_dir={out}",
            f"--data.paths=[{FIXTURES / (name.split('-')[0] + '.jsonl')}]",
            "--wandb.mode=disabled",
            *overrides,
        ],
    )


def metric_losses(out: Path) -> dict[int, float]:
    lines = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return {m["step"]: m["train/loss"] for m in lines}


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """One intra-op thread: on a shared 2-core machine a second spinning thread costs more than
    it gives for a model this small (and both runs of the resume test must match)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(autouse=True)
def _cwd(monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("WANDB_MODE", "disabled")


def test_tiny_mapreduce_recipe_trains_30_steps_and_loads_for_eval(tmp_path):
    out = tmp_path / "run"
    summary = run(
        tiny(
            "pyramid_align-mapreduce",
            out,
            "--batching.max_tokens=1024",
            "--data.max_length=1024",
            "--train.save_steps=1000",
        )
    )
    losses = summary["losses"]
    assert len(losses) == 30
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < first - 1.0, losses
    assert summary["data_stats"]["stages"]["reduce"] == 48
    info = json.loads((out / "train_info.json").read_text())
    assert len(info["data_sha256"]) == 64 and info["recipe"]["data"]["mode"] == "mapreduce"
    assert "git_sha" in info and (out / "recipe.yaml").exists()
    assert [s for s, _ in checkpoints(out / "checkpoints")] == [30]
    metrics = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert {"train/loss", "train/lr", "train/grad_norm", "train/tok_per_sec", "train/mfu"} <= set(
        metrics[0]
    )
    assert metrics[0]["train/mfu"] is None and metrics[0]["train/tok_per_sec"] > 0  # no CPU peak

    from chunkwise.llm import load_llm

    llm = load_llm(str(out))  # what `chunkwise eval --model OUTDIR` does
    try:
        assert llm.chat  # the saved tokenizer carries the chat template used in training
        c = llm.complete([{"role": "user", "content": "Question: who?"}], max_new_tokens=4)
        assert c.completion_tokens <= 4
    finally:
        llm.close()
    assert (
        run(
            tiny(
                "pyramid_align-mapreduce",
                out,
                "--batching.max_tokens=1024",
                "--data.max_length=1024",
            )
        )["resumed_from"]
        == 30
    )  # finished: nothing to redo


def test_kill_and_resume_follows_the_same_losses(tmp_path):
    common = [
        "--train.max_steps=8",
        "--train.save_steps=3",
        "--batching.max_tokens=1024",
        "--data.max_length=1024",
        "--train.save_total_limit=0",
    ]
    straight = tmp_path / "straight"
    ref = run(tiny("longalign-standard", straight, *common))["losses"]

    killed = tmp_path / "killed"
    recipe = TINY / "longalign-standard.yaml"
    cmd = [
        sys.executable,
        str(REPO / "train" / "sft.py"),
        str(recipe),
        f"--output_dir={killed}",
        f"--data.paths=[{FIXTURES / 'longalign.jsonl'}]",
        "--wandb.mode=disabled",
        *common,
    ]
    env = {**os.environ, KILL_ENV: "5", "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert [s for s, _ in checkpoints(killed / "checkpoints")] == [3]
    assert max(metric_losses(killed)) == 5  # steps 4-5 ran but were not checkpointed

    resumed = run(tiny("longalign-standard", killed, *common))
    assert resumed["resumed_from"] == 3
    curve = metric_losses(killed)
    assert sorted(curve) == list(range(1, 9))
    assert [curve[s] for s in range(1, 9)] == pytest.approx(ref, rel=1e-5, abs=1e-6)


#: a two-step LoRA run of the tiny recipe
LORA_TINY = (
    "--model.lora.enabled=true",
    "--model.lora.r=4",
    "--train.max_steps=2",
    "--batching.max_tokens=1024",
    "--data.max_length=1024",
    "--model.lora.target_modules=[q_proj,v_proj]",
)


def test_lora_adapter_output_loads_through_chunkwise_model_json(tmp_path):
    out = tmp_path / "lora"
    run(tiny("pyramid_align-standard", out, *LORA_TINY))
    assert (out / "adapter_config.json").exists()
    base = json.loads((out / "chunkwise_model.json").read_text())["base"]
    kind = json.loads((out / "train_info.json").read_text())["prompt_kind"]
    chat = {"chat": "on", "base": "off"}[kind]  # served as it was trained
    assert base == "hf:" + str((out / "base").resolve()) + f"?chat={chat}"
    from chunkwise.llm import load_llm

    llm = load_llm(str(out))  # what `chunkwise eval --model OUTDIR` does
    try:
        assert llm.chat is (kind == "chat")
        assert llm.complete("The town of", max_new_tokens=3).completion_tokens <= 3
    finally:
        llm.close()


def test_trainable_tokens_train_their_embedding_row_and_ship_in_the_adapter(tmp_path):
    """``model.lora.trainable_tokens``: the end-of-turn row moves (LoRA alone cannot move an
    embedding row) and travels in adapter_model.safetensors; an unknown token is a clear error."""
    from safetensors import safe_open

    common = LORA_TINY
    out = tmp_path / "tt"
    run(tiny("pyramid_align-standard", out, *common, "--model.lora.trainable_tokens=[<|eot_id|>]"))
    with safe_open(str(out / "adapter_model.safetensors"), "pt") as f:
        deltas = [f.get_tensor(k) for k in f.keys() if "trainable_tokens_delta" in k]  # noqa: SIM118
    assert len(deltas) == 1 and deltas[0].shape[0] == 1
    assert float(deltas[0].abs().max()) > 0  # the row trained
    cfg = json.loads((out / "adapter_config.json").read_text())
    assert cfg["trainable_token_indices"]
    with pytest.raises(BadInput, match=r"trainable_tokens: '<nope>' is not a token"):
        run(
            tiny(
                "pyramid_align-standard",
                tmp_path / "bad",
                *common,
                "--model.lora.trainable_tokens=[<nope>]",
            )
        )


def test_bad_input_fails_before_any_model_is_built(tmp_path, monkeypatch):
    import chunkwise.train.modeling as modeling

    def no_model(*a, **k):
        raise AssertionError("the model was built before the input was checked")

    monkeypatch.setattr(modeling, "build_model", no_model)
    with pytest.raises(BadInput, match=r"unknown option\(s\) train\.lrr .*did you mean"):
        tiny("longalign-standard", tmp_path / "a", "--train.lrr=1e-5")
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text((TINY / "longalign-standard.yaml").read_text() + "\nepochs: 3\n")
    with pytest.raises(BadInput, match=r"bad\.yaml:\d+: unknown option\(s\) epochs"):
        load_recipe(bad_yaml)
    with pytest.raises(
        BadInput, match=r"data\.paths\[0\]: dataset path 'nowhere/x\.jsonl' does not exist"
    ):
        load_recipe(TINY / "longalign-standard.yaml", ["--data.paths=[nowhere/x.jsonl]"])
    no_m = tmp_path / "no_m.jsonl"
    no_m.write_text(
        json.dumps({"id": "pa-9", "document": "d", "question": "q?", "answer": "a"}) + "\n"
    )
    with pytest.raises(BadInput, match=r"no_m\.jsonl:1: record 'pa-9' has no intermediate"):
        run(
            load_recipe(
                TINY / "pyramid_align-mapreduce.yaml",
                [f"--data.paths=[{no_m}]", f"--output_dir={tmp_path / 'b'}"],
            )
        )
    with pytest.raises(BadInput, match=r"longalign\.jsonl:1: record .* over data\.max_length=64"):
        run(
            tiny(
                "longalign-standard",
                tmp_path / "c",
                "--data.max_length=64",
                "--data.overlong=error",
                "--batching.max_tokens=64",
            )
        )


def test_entry_reports_errors_as_one_line(capsys):
    assert main([str(TINY / "longalign-standard.yaml"), "--batching.max_tokens=10"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "train: error: --batching.max_tokens: option batching.max_tokens='10' is not valid; "
        "expected a whole number >= 16"
    )


def test_two_runs_of_one_lora_recipe_give_the_same_adapter(tmp_path):
    """What `make default-mr` reproducing its numbers rests on: on a pretrained base, the
    LoRA init, the example subsampling and the pack order are all seeded, so a second run of a
    recipe on the same data writes the same adapter, bit for bit (on one thread here)."""
    from safetensors.torch import load_file

    run(tiny("pyramid_align-mapreduce", tmp_path / "first", *LORA_TINY))
    base = tmp_path / "first" / "base"  # a LoRA run saves its base: a pretrained tiny model
    common = (
        *LORA_TINY,
        f"--model.name_or_path={base}",
        "--model.init=pretrained",
        f"--model.tokenizer={base}",
        "--data.no_information_keep=0.5",
    )
    for name in ("a", "b"):
        run(tiny("pyramid_align-mapreduce", tmp_path / name, *common))
    a, b = (load_file(str(tmp_path / name / "adapter_model.safetensors")) for name in "ab")
    assert a.keys() == b.keys() and len(a) > 0
    assert all(a[k].equal(b[k]) for k in a)
