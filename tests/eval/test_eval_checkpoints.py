"""``chunkwise eval --model RUN_DIR --checkpoints ...``: the step checkpoints (2, 4, 6) and the
final model of a tiny training run (full fine-tuning and LoRA), each into its own run folder,
curve.json and curve.png, a rerun that skips what is finished, ``watch`` driven without sleeps,
wandb at each training step in one group, and ``chunkwise compare`` of two sweeps."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from chunkwise import cli
from chunkwise.errors import BadInput
from chunkwise.eval.checkpoint_sweep import parse_checkpoints, run_checkpoint_sweep
from chunkwise.eval.config import EvalConfig
from chunkwise.train.loop import run
from chunkwise.train.recipe import load_recipe

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "recipes" / "tiny" / "pyramid_align-standard.yaml"
FIXTURE = REPO / "tests" / "fixtures" / "train" / "pyramid_align.jsonl"
TRAIN = (
    "--train.max_steps=6",
    "--train.save_steps=2",
    "--train.save_total_limit=0",
    "--batching.max_tokens=1024",
    "--data.max_length=1024",
    "--wandb.mode=disabled",
)
LORA = ("--model.lora.enabled=true", "--model.lora.r=4", "--model.lora.target_modules=[q_proj]")
EVAL = ["--tasks", "passkey", "--data", "synthetic:300", "--limit", "2", "--context-window", "512"]


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("WANDB_MODE", "disabled")


@pytest.fixture
def main(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", {"eval": "evaluate", "compare": "compare"})
    return cli.main


def _train(out: Path, *extra: str) -> Path:
    run(load_recipe(TINY, [f"--output_dir={out}", f"--data.paths=[{FIXTURE}]", *TRAIN, *extra]))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(full fine-tuning run, LoRA run): 6 steps each, checkpoints at 2, 4 and 6."""
    root = tmp_path_factory.mktemp("train")
    return _train(root / "full"), _train(root / "lora", *LORA)


def _sweep(main, run_dir: Path, out: Path, which: str, *extra: str) -> dict:
    args = ["eval", "--model", str(run_dir), "--checkpoints", which, *EVAL, *extra]
    assert main([*args, "--output", str(out), "--no-progress"]) == 0
    return json.loads((out / "curve.json").read_text())


def _cfg(run_dir: Path, out: Path, which: str) -> EvalConfig:
    return EvalConfig(
        model=str(run_dir),
        checkpoints=which,
        tasks=["passkey"],
        data="synthetic:300",
        limit=2,
        context_window=512,
        output=str(out),
    )


def _stamps(out: Path) -> dict[str, int]:
    return {p.parent.name: p.stat().st_mtime_ns for p in out.glob("*/results.json")}


@pytest.mark.parametrize("kind", ["full", "lora"])
def test_all_checkpoints_and_the_final_model_make_one_curve(main, runs, tmp_path, kind):
    run_dir = runs[0] if kind == "full" else runs[1]
    out = tmp_path / "sweep"
    curve = _sweep(main, run_dir, out, "all")
    names = ["step-2", "step-4", "step-6", "final"]
    assert [p["name"] for p in curve["points"]] == names
    assert [p["step"] for p in curve["points"]] == [2, 4, 6, 6]
    for name, step in zip(names, [2, 4, 6, 6], strict=True):
        res = json.loads((out / name / "results.json").read_text())
        want = run_dir if name == "final" else run_dir / "checkpoints" / f"step-{step:08d}"
        assert res["config"]["model"] == str(want) and res["config"]["wandb_step"] == step
        assert res["results"]["passkey"]["n"] == 2 and res["results"]["passkey"]["errors"] == 0
    line = curve["curves"]["passkey"]
    assert [(p["step"], p["run"]) for p in line] == [
        (2, "step-2"),
        (4, "step-4"),
        (6, "step-6"),
        (6, "final"),
    ]
    assert all(p["n"] == 2 and len(p["ci95"]) == 2 for p in line)
    assert (out / "curve.png").stat().st_size > 1000
    # the last step checkpoint is the final model: the same predictions
    preds = {
        n: [
            json.loads(x)["prediction"]
            for x in (out / n / "predictions" / "passkey.jsonl").read_text().splitlines()
        ]
        for n in ("step-6", "final")
    }
    assert preds["step-6"] == preds["final"]
    # a rerun evaluates nothing again
    before = _stamps(out)
    assert _sweep(main, run_dir, out, "all")["curves"] == curve["curves"]
    assert _stamps(out) == before


def test_a_full_step_checkpoint_stops_where_the_final_model_does(runs):
    """The run's generation config (its end-of-turn ids beside the config's eos) travels with
    checkpoints/model/, so step-6 decodes exactly as the final model (from_config alone would
    stop at config.eos_token_id only)."""
    from chunkwise.llm import load_llm

    ends = []
    for spec in (runs[0] / "checkpoints" / "step-00000006", runs[0]):
        llm = load_llm(str(spec))
        try:
            ends.append(llm.model.generation_config.eos_token_id)
        finally:
            llm.close()
    assert ends[0] == ends[1] and isinstance(ends[1], list) and len(ends[1]) > 1, ends


def test_chosen_steps_and_last(main, runs, tmp_path):
    full = runs[0]
    curve = _sweep(main, full, tmp_path / "some", "2,6")
    assert [p["name"] for p in curve["points"]] == ["step-2", "step-6"]
    assert sorted(p.name for p in (tmp_path / "some").iterdir() if p.is_dir()) == [
        "step-2",
        "step-6",
    ]
    assert [p["name"] for p in _sweep(main, full, tmp_path / "last", "last")["points"]] == ["final"]
    with pytest.raises(BadInput, match="no complete checkpoint of step 3"):
        run_checkpoint_sweep(_cfg(full, tmp_path / "bad", "2,3"), progress=False)
    with pytest.raises(BadInput, match="not a training step"):
        parse_checkpoints("2,x")
    with pytest.raises(BadInput, match="not a training run's output folder"):
        run_checkpoint_sweep(_cfg(tmp_path / "some", tmp_path / "bad2", "all"), progress=False)


def test_watch_evaluates_checkpoints_as_they_appear_and_stops_at_train_info(runs, tmp_path):
    """A training run replayed: step-2 exists at the start; each wait lets the training write
    the next checkpoint, then train_info.json (the end). No sleep anywhere."""
    live, stash = tmp_path / "live", tmp_path / "stash"
    shutil.copytree(runs[0], live)
    stash.mkdir()
    later = [live / "checkpoints" / f"step-{s:08d}" for s in (4, 6)] + [live / "train_info.json"]
    for p in later:
        shutil.move(p, stash / p.name)
    out = tmp_path / "watch"
    seen: list[list[str]] = []

    def wait(seconds: float) -> None:
        assert seconds == 30.0
        seen.append(sorted(p.parent.name for p in out.glob("*/results.json")))
        nxt = later[len(seen) - 1]  # an extra wait after the end fails here (IndexError)
        shutil.move(stash / nxt.name, nxt)

    curve = run_checkpoint_sweep(_cfg(live, out, "watch"), progress=False, wait=wait)
    # each poll evaluated what had appeared by then, and nothing had to wait for the end
    assert seen == [["step-2"], ["step-2", "step-4"], ["step-2", "step-4", "step-6"]]
    assert [p["name"] for p in curve["points"]] == ["step-2", "step-4", "step-6", "final"]


def test_wandb_logs_each_checkpoint_at_its_step_in_one_group(main, runs, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for key in ("WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_DIR"):
        monkeypatch.delenv(key, raising=False)
    out = tmp_path / "wb"
    _sweep(main, runs[1], out, "2,4", "--wandb")
    for step in (2, 4):
        (run_dir,) = (out / f"step-{step}" / "wandb").glob("offline-run-*")
        log = next(run_dir.glob("run-*.wandb")).read_bytes()
        assert b"wb-checkpoints" in log  # the sweep's group
        assert list(run_dir.glob(f"files/media/table/eval/samples_{step}_*.table.json"))


def test_compare_draws_two_sweeps(main, runs, tmp_path, capsys):
    a = tmp_path / "a"
    b = tmp_path / "b"
    _sweep(main, runs[0], a, "2,4")
    _sweep(main, runs[1], b, "2,4")
    capsys.readouterr()
    png, js = tmp_path / "both.png", tmp_path / "both.json"
    assert main(["compare", str(a), str(b), "--plot", str(png), "--json", str(js)]) == 0
    table = capsys.readouterr().out
    assert "| step |" in table and str(a.name) in table and str(b.name) in table
    data = json.loads(js.read_text())
    assert [p["step"] for p in data["sweeps"][str(a)]["average"]] == [2, 4]
    assert png.stat().st_size > 1000


def test_checkpoint_folder_names_the_run_when_the_model_files_are_gone(runs, tmp_path):
    from chunkwise.llm.step_checkpoint import describe

    copy = tmp_path / "old"
    shutil.copytree(runs[0] / "checkpoints", copy / "checkpoints")
    shutil.rmtree(copy / "checkpoints" / "model")
    with pytest.raises(BadInput, match="evaluate the run's final model"):
        describe(copy / "checkpoints" / "step-00000002")
    assert os.path.isdir(runs[0] / "checkpoints" / "model")


def test_a_step_checkpoint_takes_its_runs_strategy_options_while_it_trains(runs, tmp_path):
    """A run trained on MapReduce records carries its decoding options in recipe.yaml: its
    step checkpoints get them too, before the run has finished (so a curve's points all
    decode alike)."""
    import yaml

    from chunkwise.llm.loading import strategy_defaults

    run_dir = tmp_path / "mr"
    shutil.copytree(runs[0], run_dir)
    recipe = yaml.safe_load((run_dir / "recipe.yaml").read_text())
    recipe["data"]["mode"] = "mapreduce"
    (run_dir / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    final = strategy_defaults(str(run_dir))
    assert final is not None
    (run_dir / "train_info.json").unlink()  # still training
    step = strategy_defaults(str(run_dir / "checkpoints" / "step-00000002"))
    assert step is not None and step.for_strategy("mapreduce") == final.for_strategy("mapreduce")
