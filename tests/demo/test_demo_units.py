"""`chunkwise demo` without models: documents, the held-out split, generated recipes, and the
stage ledger (skip what finished, record what failed, refuse another size in the same folder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chunkwise.demo import SIZES, Demo, DemoError, get_size
from chunkwise.demo.documents import document_sets, write_documents
from chunkwise.demo.pipeline import STAGES
from chunkwise.errors import BadInput
from chunkwise.train.recipe import load_recipe


def count(text: str) -> int:
    return len(text) // 4


def test_document_sets_are_deterministic_disjoint_and_held_out(tmp_path):
    size = get_size("smoke")
    sets = document_sets(size, 0, count)
    assert [d.id for d, _, _ in sets["train"]] == [
        d.id for d, _, _ in document_sets(size, 0, count)["train"]
    ]
    assert (
        len(sets["train"]) == len(size.train_families) * len(size.train_lengths) * size.train_docs
    )
    assert len(sets["heldout"]) == len(size.eval_tasks) * size.eval_n
    train_ctx = {d.context for d, _, _ in sets["train"]}
    assert not train_ctx & {d.context for d, _, _ in sets["heldout"]}
    assert {d.family for d, _, _ in sets["heldout"]} == set(size.eval_tasks)
    assert size.unseen_families() == ("number_string",)
    # the held-out set is what `chunkwise eval --benchmark generated` reads
    from chunkwise.benchmarks import get_benchmark

    bench = get_benchmark("generated")
    td = bench.load(
        "number_string", bench.parse_data(f"heldout:{size.eval_length}"), limit=size.eval_n,
        count_tokens=count,
    )  # fmt: skip
    assert [e["context"] for e in td.examples] == [
        d.context for d, _, _ in sets["heldout"] if d.family == "number_string"
    ]
    summary = write_documents(tmp_path / "docs", sets)
    assert summary["heldout"] == {t: size.eval_n for t in size.eval_tasks}
    row = json.loads((tmp_path / "docs" / "heldout.jsonl").read_text().splitlines()[0])
    assert row["answer"] in row["context"] and row["seed"] != 0


def test_split_refuses_a_held_out_document_seen_in_training(tmp_path):
    demo = Demo(tmp_path / "d", get_size("smoke"))
    demo.load_state()
    (tmp_path / "d" / "synth" / "data").mkdir(parents=True)
    (tmp_path / "d" / "docs").mkdir(parents=True)
    rec = {"id": "a", "document": "the same text", "question": "q?", "answer": "x"}
    (tmp_path / "d" / "synth" / "data" / "oracle.jsonl").write_text(json.dumps(rec) + "\n")
    held = {"id": "h", "context": "other text", "family": "passkey"}
    (tmp_path / "d" / "docs" / "heldout.jsonl").write_text(json.dumps(held) + "\n")
    summary, line = demo.split()
    assert summary["train"] == 1 and "none of them trained on" in line
    spec = json.loads((tmp_path / "d" / "data" / "heldout.json").read_text())
    assert spec["data"] == f"heldout:{demo.size.eval_length}" and spec["unseen_families"] == [
        "number_string"
    ]
    held["context"] = "the same text"
    (tmp_path / "d" / "docs" / "heldout.jsonl").write_text(json.dumps(held) + "\n")
    with pytest.raises(DemoError, match="also training documents"):
        demo.split()


@pytest.mark.parametrize("mode", ["standard", "mapreduce"])
def test_generated_recipes_are_valid_and_carry_the_size(tmp_path, mode):
    size = get_size("small")
    demo = Demo(tmp_path / "demo", size)
    demo.load_state()
    (tmp_path / "demo" / "data").mkdir(parents=True)
    (tmp_path / "demo" / "data" / "train.jsonl").write_text("")
    recipe = load_recipe(demo.write_recipe(mode))
    assert recipe.model.name_or_path == "default" and recipe.model.lora.enabled
    assert recipe.model.lora.r == size.lora_r
    assert recipe.model.lora.trainable_tokens == ["<end_of_turn>"]
    assert recipe.model.chat_template.endswith("gemma_chat.jinja")
    assert recipe.data.mode == mode and recipe.data.prompts == "chat"
    assert recipe.train.max_steps == size.steps(mode) and recipe.train.lr == size.lr
    assert recipe.batching.max_tokens == size.train_max_length
    assert recipe.output_dir == str((tmp_path / "demo" / "train" / mode).resolve())
    from chunkwise.train.engine import fast_bf16

    assert recipe.train.precision == ("bf16" if fast_bf16() else "fp32")
    if mode == "mapreduce":
        assert recipe.data.mapreduce == {
            "prompts": "chat",
            "chunk_tokens": size.map_chunk_tokens,
            "max_new_tokens": size.max_new_tokens,
        }
        assert recipe.data.max_length == size.train_max_length
    else:  # standard training sees what standard decoding sees: the window
        assert recipe.data.max_length == size.eval_window


def test_every_size_reads_beyond_its_window_and_holds_a_family_out():
    for s in SIZES.values():
        assert s.eval_length > s.eval_window  # standard decoding must cut the documents
        assert s.map_chunk_tokens < s.eval_window
        assert s.train_max_length > s.map_chunk_tokens  # a map example fits a training row
        assert s.unseen_families()  # at least one family never trained on
    assert SIZES["small"].eval_n >= 20 and SIZES["full"].eval_n >= 20


class Ledger(Demo):
    """A demo whose stages only count their calls (and can be told to fail once)."""

    def __init__(self, *a, fail=None, **k):
        super().__init__(*a, echo=lambda s: self.lines.append(s), **k)
        self.lines: list[str] = []
        self.calls: list[str] = []
        self.fail = fail
        for name in STAGES:
            setattr(self, name, self._stage(name))

    def _stage(self, name):
        def run():
            self.calls.append(name)
            if name == self.fail:
                self.fail = None
                raise RuntimeError("boom")
            return {"n": 1}, f"{name} ok"

        return run


def test_finished_stages_are_skipped_and_a_failure_is_recorded(tmp_path):
    out = tmp_path / "demo"
    first = Ledger(out, get_size("smoke"), fail="training")
    with pytest.raises(RuntimeError):
        first.run()
    assert first.calls == ["documents", "synthesis", "split", "training"]
    state = json.loads((out / "demo.json").read_text())
    assert state["stages"]["training"]["status"] == "failed"
    assert "boom" in state["stages"]["training"]["error"]
    assert state["stages"]["split"]["status"] == "done"

    second = Ledger(out, get_size("smoke"))
    second.run()
    assert second.calls == ["training", "evaluation", "report"]
    assert sum("reused" in line for line in second.lines) == 3

    third = Ledger(out, get_size("smoke"))
    third.run()
    assert third.calls == []

    with pytest.raises(BadInput, match="--fresh"):
        Ledger(out, get_size("small")).run()
    # the same size name with other settings (an older chunkwise's "smoke") is refused too
    import dataclasses

    other = dataclasses.replace(get_size("smoke"), train_docs=3)
    with pytest.raises(BadInput, match="other sizes"):
        Ledger(out, other).run()
    # ... but not for what changes no result: the time estimate, documents answered at once
    faster = dataclasses.replace(get_size("smoke"), expected="a while", eval_parallel=3)
    fourth = Ledger(out, faster)
    fourth.run()
    assert fourth.calls == []
    ledger = json.loads((out / "demo.json").read_text())
    assert ledger["sizes"]["eval_parallel"] == 3 and ledger["sizes"]["expected"] == "a while"
    # a ledger from before a setting existed holds it at its default: the same run
    for key in ("max_new_tokens", "eval_parallel"):
        ledger["sizes"].pop(key)
    (out / "demo.json").write_text(json.dumps(ledger))
    older = dataclasses.replace(get_size("smoke"), max_new_tokens=0)
    with pytest.raises(BadInput, match="other sizes"):
        Ledger(out, get_size("smoke")).run()  # smoke caps new tokens: not the default
    fifth = Ledger(out, older)
    fifth.run()
    assert fifth.calls == []


def test_bad_out_and_model_fail_before_any_stage(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(BadInput, match="is a file"):
        Ledger(afile, get_size("smoke")).run()
    bad = Ledger(tmp_path / "d", get_size("smoke"), model="openai:m@http://127.0.0.1:1/v1")
    with pytest.raises(BadInput, match="hf:default"):
        bad.run()
    assert bad.calls == []


def test_split_refuses_to_train_on_nothing(tmp_path):
    demo = Demo(tmp_path / "d", get_size("smoke"))
    demo.load_state()
    (tmp_path / "d" / "synth" / "data").mkdir(parents=True)
    (tmp_path / "d" / "synth" / "data" / "part.jsonl").write_text("")
    with pytest.raises(DemoError, match="no records"):
        demo.split()


def test_evaluation_engines_and_their_specs(tmp_path, monkeypatch):
    from chunkwise.demo import engines

    assert engines.engine_spec("hf:default", "vllm") == "vllm:default"
    assert engines.engine_spec("hf:default-mr", "vllm") == "vllm:default-mr"
    assert engines.engine_spec("/runs/demo/train/mapreduce", "vllm") == (
        "vllm:/runs/demo/train/mapreduce"
    )
    assert engines.engine_spec("hf:default", "hf") == "hf:default"
    demo = Demo(tmp_path / "d", get_size("smoke"), engine="tpu")
    with pytest.raises(BadInput, match="--engine"):
        demo.eval_engine()
    monkeypatch.setattr(engines, "has_vllm", lambda: False)
    monkeypatch.setattr(engines, "vllm_python", lambda: None)
    assert Demo(tmp_path / "d", get_size("smoke")).eval_engine() == "hf"  # auto, no vLLM
    with pytest.raises(BadInput, match="make vllm"):
        Demo(tmp_path / "d", get_size("smoke"), engine="vllm").eval_engine()
    # the vLLM environment's process failing is one error naming its log
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho engine exploded\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(DemoError, match="(?s)exit 3.*engine exploded"):
        engines.evaluate_in(fake, tmp_path / "d", ["base"], engines.Progress([], 1))
    # every model is read with the same chunks; the trained ones with the chat protocol
    models = {m.label: m for m in Demo(tmp_path / "d", get_size("small")).eval_models()}
    assert models["base"].decodings["mapreduce"] == {"chunk_tokens": 500}
    assert models["sft-mapreduce"].decodings["mapreduce"] == {
        "prompts": "chat",
        "chunk_tokens": 500,
        "max_new_tokens": get_size("small").max_new_tokens,
    }
    assert "reference" not in models  # small leaves the packaged adapter out (time)
    full = {m.label: m for m in Demo(tmp_path / "d", get_size("full")).eval_models()}
    assert set(full["reference"].decodings) == {"mapreduce"}


def test_the_vllm_side_entry_point_fails_in_one_line(tmp_path):
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-m", "chunkwise.demo.evaluate", str(tmp_path / "none"), "base"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2
    assert run.stderr.strip().splitlines() == [
        f"chunkwise.demo.evaluate: error: demo ledger {tmp_path / 'none' / 'demo.json'} not found"
    ]
    for text in ("", '{"size": "smoke",', '{"size": "smoke"}'):  # empty, malformed, not a ledger
        (tmp_path / "demo.json").write_text(text)
        run = subprocess.run(
            [sys.executable, "-m", "chunkwise.demo.evaluate", str(tmp_path), "base"],
            capture_output=True,
            text=True,
        )
        assert run.returncode == 2
        assert len(run.stderr.strip().splitlines()) == 1 and "demo.json" in run.stderr


SIGTERM_SCRIPT = """
import os, sys
from chunkwise import cli
from chunkwise.demo import pipeline
from chunkwise.demo.child import run_logged

marker = sys.argv[1]
child = "import os, pathlib, sys, time; pathlib.Path(sys.argv[1]).write_text(str(os.getpid())); time.sleep(300)"


def documents(self):
    run_logged([sys.executable, "-c", child, marker], self.out / "child.log", "child", {})
    return {}, "never"


pipeline.Demo.documents = documents
sys.exit(cli.main(["demo", "--size", "smoke", "--out", sys.argv[2], "--engine", "hf"]))
"""


def test_sigterm_records_the_stage_as_interrupted_and_stops_its_child(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    marker, out = tmp_path / "child.pid", tmp_path / "demo"
    demo = subprocess.Popen([sys.executable, "-c", SIGTERM_SCRIPT, str(marker), str(out)])
    deadline = time.monotonic() + 120
    while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)  # waiting for the child to start, not timing anything
    child = int(marker.read_text())
    demo.send_signal(signal.SIGTERM)
    assert demo.wait(timeout=120) != 0
    state = json.loads((out / "demo.json").read_text())
    assert state["stages"]["documents"]["status"] == "interrupted"
    with pytest.raises(ProcessLookupError):  # terminated and reaped, not left running
        os.kill(child, 0)


def test_evaluation_progress_counts_answered_documents(tmp_path):
    """The vLLM-side evaluation's progress bar reads the prediction files as they grow."""
    demo = Demo(tmp_path / "d", get_size("smoke"))
    models = demo.eval_models()
    progress = demo.progress(models, "vllm")
    size = demo.size
    assert progress.total == len(models) * 2 * len(size.eval_tasks) * size.eval_n
    assert progress.done() == 0
    first = progress.outputs[0] / "predictions"
    first.mkdir(parents=True)
    (first / "number_string.jsonl").write_text('{"id": 1}\n{"id": 2}\n')
    (progress.outputs[-1] / "predictions").mkdir(parents=True)
    (progress.outputs[-1] / "predictions" / "t.jsonl").write_text('{"id": 3}\n')
    assert progress.done() == 3


def test_training_launch_uses_every_core_on_cpu(tmp_path, monkeypatch):
    """accelerate launch without --cpu hands its child OMP_NUM_THREADS=1: the demo's training
    ran on one core of two. The real launcher, with a script that reports its threads."""
    import os
    import subprocess

    import torch

    from chunkwise.demo.training import training_command

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cmd = training_command(tmp_path / "recipe.yaml")
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import os, torch; print(os.environ['OMP_NUM_THREADS'], torch.get_num_threads())"
    )
    cmd[cmd.index("-m") :] = [str(probe)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=True).stdout
    cores = len(os.sched_getaffinity(0))
    if not torch.cuda.is_available():
        assert out.split()[-2:] == [str(cores), str(cores)]
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # a caller's own setting wins
    cmd = training_command(probe)
    if not torch.cuda.is_available():
        assert cmd[cmd.index("--num_cpu_threads_per_process") + 1] == "1"


def test_recipes_and_training_entry_come_from_the_installed_package(tmp_path):
    """An installed (non-editable) chunkwise has no checkout around it: the demo's recipe
    templates, chat template and training entry are all found inside the package."""
    import chunkwise
    from chunkwise.demo import training

    package = Path(chunkwise.__file__).resolve().parent
    for mode in ("standard", "mapreduce"):
        template = training.recipe_template(mode).resolve()
        assert template.is_file() and package in template.parents
    demo = Demo(tmp_path / "demo", get_size("smoke"))
    demo.load_state()
    (tmp_path / "demo" / "data").mkdir(parents=True)
    (tmp_path / "demo" / "data" / "train.jsonl").write_text("")
    recipe = load_recipe(demo.write_recipe("mapreduce"))
    template = Path(recipe.model.chat_template).resolve()
    assert template.is_file() and package in template.parents
    cmd = training.training_command(tmp_path / "r.yaml")
    assert cmd[-3:] == ["-m", "chunkwise.train", str(tmp_path / "r.yaml")]
    import importlib.util

    assert importlib.util.find_spec("chunkwise.train.__main__") is not None


def test_rerun_commands_name_the_engine_the_evaluation_ran_on(tmp_path):
    from chunkwise.demo.summary import rerun_commands

    demo = Demo(tmp_path / "d", get_size("smoke"))
    demo.load_state()
    ckpt = str(tmp_path / "d" / "train" / "mapreduce")
    assert f"chunkwise eval --model {ckpt} " in rerun_commands(demo)[-1]  # hf: no record yet
    demo.state.setdefault("stages", {})["evaluation"] = {"summary": {"engine": "vllm"}}
    last = rerun_commands(demo)[-1]
    assert last.startswith(f".venv-vllm/bin/chunkwise eval --model vllm:{ckpt} ")
