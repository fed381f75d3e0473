"""Adapters with trained embedding rows are merged for engines whose LoRA drops them (vLLM):
the merged folder computes what base + adapter compute, is built once, and the vLLM backend's
spec resolution serves it instead of a LoRA request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


def _adapter_with_token_rows(base: Path, out: Path, token_id: int) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    model = get_peft_model(
        AutoModelForCausalLM.from_pretrained(base),
        LoraConfig(r=4, target_modules=["q_proj", "v_proj"], trainable_token_indices=[token_id]),
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name or "trainable_tokens_delta" in name:
                p.normal_(0, 1.0)
    model.save_pretrained(out)
    (out / "chunkwise_model.json").write_text(json.dumps({"base": f"hf:{base}"}))
    return out


@pytest.fixture(scope="module")
def token_adapter(tiny_llama, tiny_tokenizer, tmp_path_factory) -> tuple[Path, int]:
    tid = tiny_tokenizer.eos_token_id
    return _adapter_with_token_rows(tiny_llama, tmp_path_factory.mktemp("tok-lora"), tid), tid


def test_needs_merge_only_for_adapters_that_train_more_than_linear_layers(
    tiny_llama, token_adapter, save_random_lora, tmp_path
):
    from chunkwise.llm.merged import needs_merge

    assert needs_merge(token_adapter[0])
    assert not needs_merge(save_random_lora(tiny_llama, tmp_path / "plain"))
    assert not needs_merge(tmp_path / "nowhere")  # the engine reports a missing adapter


def test_merged_folder_computes_base_plus_adapter_and_is_built_once(
    tiny_llama, token_adapter, tmp_path, monkeypatch
):
    import peft
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from chunkwise.llm.merged import merged_dir

    adapter, tid = token_adapter
    out = merged_dir(tiny_llama, adapter, cache=tmp_path)
    ids = torch.tensor([[1, 5, tid, 7, tid, 3]])
    with torch.no_grad():
        want = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_llama), adapter)(
            input_ids=ids
        ).logits
        base = AutoModelForCausalLM.from_pretrained(tiny_llama)(input_ids=ids).logits
        got = AutoModelForCausalLM.from_pretrained(out)(input_ids=ids).logits
    assert float((got - want).abs().max()) < 1e-4
    assert float((base - want).abs().max()) > 1e-2  # the adapter does change the output
    assert (out / "tokenizer_config.json").is_file()

    def no_merge(*a, **k):
        raise AssertionError("merged twice")

    monkeypatch.setattr(peft.PeftModel, "from_pretrained", no_merge)
    assert merged_dir(tiny_llama, adapter, cache=tmp_path) == out


def test_one_adapter_under_two_chat_templates_is_two_merged_folders(
    tiny_llama, tiny_tokenizer, token_adapter, tmp_path
):
    """The merged folder takes the adapter folder's tokenizer files (its chat template), so
    its name covers them: the same weights with template A, with template B and with none
    (the base's tokenizer) give three folders, each with its own; one built first is never
    served for another (a copy of only the adapter's weights once got the trained one's)."""
    import shutil

    from chunkwise.llm.merged import merged_dir

    adapter, _ = token_adapter
    folders = {}
    for name, template in (("a", "A{{ messages }}"), ("b", "B{{ messages }}"), ("bare", None)):
        copy = tmp_path / name
        copy.mkdir()
        for f in ("adapter_config.json", "adapter_model.safetensors"):
            shutil.copyfile(adapter / f, copy / f)
        if template is not None:  # the tokenizer as a training run saves it, with its template
            tiny_tokenizer.save_pretrained(copy)
            (copy / "chat_template.jinja").write_text(template)
        folders[name] = merged_dir(tiny_llama, copy, cache=tmp_path / "cache")
    assert len(set(folders.values())) == 3
    for name in ("a", "b"):
        assert (folders[name] / "chat_template.jinja").read_text().startswith(name.upper())
    assert not (folders["bare"] / "chat_template.jinja").exists()  # the base has none
    assert (folders["bare"] / "tokenizer_config.json").is_file()


def test_vllm_resolution_serves_the_merged_folder_not_a_lora_request(
    tiny_llama, token_adapter, save_random_lora, tmp_path, monkeypatch
):
    from chunkwise.llm import merged
    from chunkwise.llm.spec import parse_spec
    from chunkwise.llm.vllm_backend import _resolve

    monkeypatch.setattr(merged, "merged_dir", lambda base, adapter: tmp_path / "m")
    spec = _resolve(parse_spec(f"vllm:{token_adapter[0]}"))
    assert spec.target == str(tmp_path / "m") and spec.adapter is None
    plain = save_random_lora(tiny_llama, tmp_path / "plain")
    spec = _resolve(parse_spec(f"vllm:{plain}"))
    assert spec.target == str(tiny_llama) and spec.adapter == str(plain)


def _same_shaped_base(base: Path, out: Path) -> Path:
    """A copy of ``base`` whose weights differ (same names, shapes, dtypes and file size)."""
    import shutil

    from safetensors.torch import load_file, save_file

    shutil.copytree(base, out)
    weights = load_file(str(base / "model.safetensors"))
    name = next(k for k in sorted(weights) if k.endswith("q_proj.weight"))
    weights[name] = weights[name] + 0.5
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


def test_same_shaped_bases_with_other_weights_get_their_own_merged_model(
    tiny_llama, token_adapter, tmp_path
):
    from safetensors.torch import load_file

    from chunkwise.llm.merged import merged_dir

    adapter, _ = token_adapter
    other = _same_shaped_base(tiny_llama, tmp_path / "other-base")
    a_file, b_file = tiny_llama / "model.safetensors", other / "model.safetensors"
    assert a_file.stat().st_size == b_file.stat().st_size  # name and size alone cannot tell
    assert a_file.read_bytes() != b_file.read_bytes()
    merged_a = merged_dir(tiny_llama, adapter, cache=tmp_path / "cache")
    merged_b = merged_dir(other, adapter, cache=tmp_path / "cache")
    assert merged_a != merged_b
    wa = load_file(str(merged_a / "model.safetensors"))
    wb = load_file(str(merged_b / "model.safetensors"))
    name = next(k for k in sorted(wb) if k.endswith("q_proj.weight"))
    base_b = load_file(str(b_file))
    base_a = load_file(str(a_file))
    # each merged model carries its own base's weights (+ the same LoRA delta)
    assert float(((wb[name] - wa[name]) - (base_b[name] - base_a[name])).abs().max()) < 1e-5
    assert float((wb[name] - wa[name]).abs().max()) > 0.4


def test_base_weights_are_hashed_once_per_file_version(tmp_path, monkeypatch):
    import os

    from chunkwise import digests

    f = tmp_path / "model.safetensors"
    f.write_bytes(b"a" * 1000)
    reads = []
    real = digests.file_sha256
    monkeypatch.setattr(digests, "file_sha256", lambda p: reads.append(p) or real(p))
    cache = tmp_path / "digests"
    first = digests.cached_file_sha256(f, cache)
    assert digests.cached_file_sha256(f, cache) == first and len(reads) == 1  # remembered
    st = f.stat()
    new = tmp_path / "new.safetensors"  # a new file of the same size renamed over the old,
    new.write_bytes(b"b" * 1000)  # its mtime set to the old one's: the inode tells
    os.utime(new, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(new, f)
    second = digests.cached_file_sha256(f, cache)
    assert second != first and len(reads) == 2
    f.write_bytes(b"c" * 1000)  # rewritten in place, same size, a later mtime
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    third = digests.cached_file_sha256(f, cache)
    assert third not in (first, second) and len(reads) == 3
    (cache / next(cache.iterdir()).name).write_text("{not json")  # a damaged entry: recomputed
    assert digests.cached_file_sha256(f, cache) == third and len(reads) == 4
