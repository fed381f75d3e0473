"""``hf:default-mr`` resolution: a clear error until an adapter is committed; then a loadable
adapter folder over the embedded model with the protocol's chat template."""

from __future__ import annotations

import json

import pytest

from chunkwise.errors import BadInput
from chunkwise.llm import default_mr, load_llm


def test_without_an_adapter_it_says_to_run_make_default_mr(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_DEFAULT_MR", str(tmp_path / "none"))
    with pytest.raises(BadInput, match="make default-mr"):
        load_llm("hf:default-mr")
    with pytest.raises(BadInput, match="make default-mr"):
        default_mr.strategy_args()


def test_each_packaged_adapter_names_its_own_make_target(tmp_path, monkeypatch):
    monkeypatch.setenv("CHUNKWISE_DEFAULT_COA", str(tmp_path / "none"))
    with pytest.raises(BadInput, match="hf:default-coa .*make default-coa"):
        load_llm("vllm:default-coa")
    with pytest.raises(BadInput, match="no packaged adapter 'default-xyz'"):
        default_mr.package_dir("default-xyz")


def test_resolves_to_an_adapter_folder_with_the_chat_template(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "adapter_config.json").write_text('{"base_model_name_or_path": "x"}')
    (pkg / "adapter_model.safetensors").write_bytes(b"weights")
    (pkg / "strategy.json").write_text(json.dumps({"mapreduce": {"chunk_tokens": 900}}))
    base = tmp_path / "base"
    base.mkdir()
    (base / "tokenizer.json").write_text("{}")
    (base / "tokenizer_config.json").write_text('{"eos_token": "<eos>"}')
    (base / "model.safetensors").write_bytes(b"big")
    monkeypatch.setenv("CHUNKWISE_DEFAULT_MR", str(pkg))
    monkeypatch.setenv("CHUNKWISE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("chunkwise.llm.embedded.converted_dir", lambda: base)
    from chunkwise.llm.spec import parse_spec

    ms = default_mr.resolve(parse_spec("hf:default-mr?ctx=4096"))
    folder = default_mr.model_dir()
    assert ms.target == str(folder) and ms.options == {"chat": "on", "ctx": "4096"}
    assert ms.backend == "hf"
    on_vllm = default_mr.resolve(parse_spec("vllm:default-mr?max_model_len=8192"))
    assert (on_vllm.backend, on_vllm.target) == ("vllm", str(folder))
    assert (folder / "adapter_model.safetensors").read_bytes() == b"weights"
    assert (folder / "tokenizer.json").is_symlink() and not (folder / "model.safetensors").exists()
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    assert "<start_of_turn>model" in cfg["chat_template"] and cfg["eos_token"] == "<eos>"
    assert json.loads((folder / "chunkwise_model.json").read_text())["base"].startswith(
        "hf:default"
    )
    assert default_mr.strategy_args() == {"chunk_tokens": 900}
    from chunkwise.llm.loading import model_identity

    before = model_identity("vllm:default-mr")
    assert before.startswith("vllm:default-mr = default-mr-") and folder.name in before
    assert model_identity("hf:default") == "hf:default"
    # a new adapter gets a new folder (the cache is keyed by the adapter's bytes), and results
    # cached under the old adapter's identity are not reused for it (bench ledgers)
    (pkg / "adapter_model.safetensors").write_bytes(b"retrained")
    assert default_mr.model_dir() != folder
    assert model_identity("vllm:default-mr") != before


def test_install_copies_the_adapter_and_its_decoding_options(tmp_path, monkeypatch):
    run = tmp_path / "train"
    run.mkdir()
    import torch
    from safetensors.torch import load_file, save_file

    (run / "adapter_config.json").write_text("{}")
    weights = {"a.lora_A.weight": torch.randn(4, 8), "b.ids": torch.arange(3)}
    save_file(weights, str(run / "adapter_model.safetensors"))
    (run / "recipe.yaml").write_text(
        "data:\n  window: 4096\n  mapreduce: {prompts: chat, chunk_tokens: 1000}\n"
    )
    (run / "train_info.json").write_text(json.dumps({
        "recipe": {"output_dir": str(tmp_path / "runs/x/train"),
                   "data": {"paths": [str(tmp_path / "runs/x/a.jsonl"), "/elsewhere/b.jsonl"]}},
        "steps": 3,
    }))  # fmt: skip
    monkeypatch.chdir(tmp_path)
    dest = default_mr.install(run, tmp_path / "pkg")
    # paths under the checkout it was installed from are committed relative to it
    assert json.loads((dest / "train_info.json").read_text()) == {
        "recipe": {"output_dir": "runs/x/train",
                   "data": {"paths": ["runs/x/a.jsonl", "/elsewhere/b.jsonl"]}},
        "steps": 3,
    }  # fmt: skip
    monkeypatch.setenv("CHUNKWISE_DEFAULT_MR", str(dest))
    assert default_mr.strategy_args() == {
        "grounding": True,  # decoding-only (DECODING), beside what the recipe trained with
        "snap_quotes": True,
        "anchor_quotes": True,
        "prompts": "chat",
        "chunk_tokens": 1000,
        "window": 4096,
    }
    shipped = load_file(str(dest / "adapter_model.safetensors"))  # fp16: half the size
    assert (
        shipped["a.lora_A.weight"].dtype == torch.float16 and shipped["b.ids"].dtype == torch.int64
    )
    assert torch.allclose(shipped["a.lora_A.weight"].float(), weights["a.lora_A.weight"], atol=1e-2)
    assert default_mr.main(["install", str(tmp_path / "nothing")]) == 2
