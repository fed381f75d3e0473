"""Evaluating training outputs: a folder of full weights, and a LoRA adapter over its base,
each under `standard` and `mapreduce` (tiny random Llama built in-process; fast)."""

from __future__ import annotations

import json

import pytest

from chunkwise import cli


@pytest.fixture
def main(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", {"eval": "evaluate", "compare": "compare"})
    return cli.main


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """A tiny model runs ~20x faster on one thread than on cores shared with other jobs."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory, tiny_llama, tiny_tokenizer, save_random_lora):
    """(full-weights folder, adapter folder) as a training run would leave them."""
    adapter = save_random_lora(tiny_llama, tmp_path_factory.mktemp("ckpt") / "lora")
    tiny_tokenizer.save_pretrained(adapter)
    return tiny_llama, adapter


def evaluate(main, model, strategy, out):
    args = [
        "eval",
        "--model",
        str(model),
        "--strategy",
        strategy,
        "--tasks",
        "passkey",
        "--data",
        "synthetic:300",
        "--limit",
        "3",
        "--context-window",
        "512",
        "--output",
        str(out),
        "--no-progress",
    ]
    if strategy == "mapreduce":  # small chunks: several map calls per document
        args += ["--strategy-args", "chunk_tokens=160"]
    assert main(args) == 0
    preds = [
        json.loads(x) for x in (out / "predictions" / "passkey.jsonl").read_text().splitlines()
    ]
    return preds, json.loads((out / "results.json").read_text())


@pytest.mark.parametrize("strategy", ["standard", "mapreduce"])
def test_full_weights_and_lora_checkpoints(main, checkpoints, tmp_path, strategy):
    full, adapter = checkpoints
    base_preds, base_res = evaluate(main, full, strategy, tmp_path / "full")
    lora_preds, lora_res = evaluate(main, adapter, strategy, tmp_path / "lora")
    for preds, res, model in ((base_preds, base_res, full), (lora_preds, lora_res, adapter)):
        assert [p["id"] for p in preds] == [0, 1, 2]
        assert all(p["model"] == str(model) and p["strategy"] == strategy for p in preds)
        assert res["model"]["spec"] == str(model) and res["model"]["strategy_window"] == 512
        assert res["model"]["dtype"] == "float32"  # CPU, pinned by CHUNKWISE_CPU_DTYPE
        assert res["results"]["passkey"]["n"] == 3 and res["results"]["passkey"]["errors"] == 0
        assert 0.0 <= res["results"]["passkey"]["score"] <= 100.0
        if strategy == "mapreduce":  # 160-token chunks split each ~300-token document
            assert all(p["stats"]["chunks"] >= 2 for p in preds)
            assert all(p["trace"][-1]["stage"] == "reduce" for p in preds)
    # the adapter was applied on top of its base, not ignored
    raw = [
        [e["output"].get("raw", e["output"].get("answer")) for e in p["trace"]] for p in base_preds
    ]
    raw_lora = [
        [e["output"].get("raw", e["output"].get("answer")) for e in p["trace"]] for p in lora_preds
    ]
    assert raw != raw_lora
    # provenance: where the weights were, what they sit on, and a hash of them
    full_p = base_res["model"]["provenance"]["checkpoint"]
    lora_p = lora_res["model"]["provenance"]["checkpoint"]
    assert full_p["path"] == str(full.resolve()) and full_p["kind"] == "weights"
    assert lora_p["path"] == str(adapter.resolve()) and lora_p["kind"] == "adapter"
    assert lora_res["model"]["provenance"]["base_model"] == f"hf:{full}"
    assert full_p["weights"]["method"] == "full" and len(full_p["weights"]["sha256"]) == 64
    assert full_p["weights"]["sha256"] != lora_p["weights"]["sha256"]
