"""`chunkwise demo --size smoke`: the whole loop with the real embedded model, end to end —
synthesis, LoRA training in both modes through accelerate + `-m chunkwise.train`, evaluation of the
base model and both checkpoints, the comparison — then a rerun that reuses everything."""

from __future__ import annotations

import json

import pytest

from chunkwise import cli
from chunkwise.demo.pipeline import DECODING, STAGES, TRAIN_MODES
from chunkwise.demo.sizes import get_size
from chunkwise.synth import validate_record


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


@pytest.mark.slow
def test_smoke_demo_produces_every_artifact_and_resumes(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")  # what a user gets (the suite disables wandb)
    out = tmp_path / "demo"
    size = get_size("smoke")
    assert cli.main(["demo", "--size", "smoke", "--out", str(out), "--engine", "hf"]) == 0
    printed = capsys.readouterr().out

    state = json.loads((out / "demo.json").read_text())
    assert [s for s in STAGES if state["stages"][s]["status"] == "done"] == list(STAGES)

    # documents with ground truth, held out from training; oracle records train
    held = lines(out / "docs" / "heldout.jsonl")
    assert len(held) == len(size.eval_tasks) * size.eval_n
    records = lines(out / "synth" / "data" / "oracle.jsonl")
    assert records and all(validate_record(r) == [] for r in records)
    assert all(r["meta"]["model"] == "oracle" for r in records)
    assert not {r["document"] for r in records} & {d["context"] for d in held}
    assert lines(out / "data" / "train.jsonl") == records

    # training: a LoRA adapter per mode, on the embedded base, with its loss curve and wandb run
    for mode in TRAIN_MODES:
        ckpt = out / "train" / mode
        assert (ckpt / "adapter_config.json").exists()
        base = json.loads((ckpt / "chunkwise_model.json").read_text())["base"]
        assert base == "hf:default?chat=on"  # trained on chat turns, served chat turns
        info = json.loads((ckpt / "train_info.json").read_text())
        assert info["steps"] == size.steps(mode)
        metrics = lines(ckpt / "metrics.jsonl")
        assert len(metrics) == size.steps(mode)
        assert all(m["train/loss"] > 0 for m in metrics)
        assert list((ckpt / "wandb").glob("offline-run-*"))

    # evaluation: every model x decoding on the held-out documents, scored by ground truth
    for model in ("base", *(f"sft-{m}" for m in TRAIN_MODES)):
        for strategy in DECODING:
            res = json.loads((out / "eval" / model / strategy / "results.json").read_text())
            assert set(res["results"]) == set(size.eval_tasks)
            assert all(r["n"] == size.eval_n and r["errors"] == 0 for r in res["results"].values())
            assert res["config"]["strategy"] == strategy
            assert res["config"]["benchmark"] == "generated"
            assert res["model"]["strategy_window"] <= size.eval_window
    cfg = json.loads((out / "eval" / "sft-mapreduce" / "mapreduce" / "results.json").read_text())[
        "config"
    ]
    assert cfg["model"] == str((out / "train" / "mapreduce").resolve())
    want = {"prompts": "chat", "chunk_tokens": size.map_chunk_tokens}
    want["max_new_tokens"] = size.max_new_tokens
    assert cfg["strategy_args"] == {k: str(v) for k, v in want.items()}  # as results.json keeps

    # report: the table with intervals and the verdict printed and saved, the chart a real PNG
    png = (out / "report" / "accuracy.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    report = json.loads((out / "report" / "report.json").read_text())
    assert len(report["cells"]) == 6 * len(size.eval_tasks)
    assert report["verdict"] and report["verdict"][0] in printed
    assert (
        "| number_string (never trained on) |" in printed and "sft-mapreduce/mapreduce" in printed
    )
    from chunkwise.demo.training import rerun_training

    assert rerun_training(out / "recipes" / "mapreduce.yaml") in printed  # on CPU: --cpu

    # a rerun finds every stage done and changes nothing
    before = {p: p.stat().st_mtime_ns for p in out.rglob("results.json")}
    assert cli.main(["demo", "--size", "smoke", "--out", str(out), "--engine", "hf"]) == 0
    again = capsys.readouterr().out
    assert again.count("reused") == len(STAGES)
    assert {p: p.stat().st_mtime_ns for p in out.rglob("results.json")} == before
