"""No code runs from a model folder unless the user's own spec says so.

A tiny custom-architecture model (the tiny random Llama under a custom class whose module
writes a marker file when imported) is named, with ``?trust_remote_code=1``, by an adapter
folder's ``chunkwise_model.json`` and by its ``adapter_config.json``: loading the folder must
not import the module. The user's own ``hf:FOLDER?trust_remote_code=1`` still loads it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from chunkwise.errors import BadInput
from chunkwise.llm import load_llm
from chunkwise.llm.spec import file_options

MODULE = """from pathlib import Path
Path({marker!r}).write_text("imported")
from transformers import LlamaConfig, LlamaForCausalLM


class CustomConfig(LlamaConfig):
    model_type = "chunkwise_fault_custom"


class CustomForCausalLM(LlamaForCausalLM):
    config_class = CustomConfig
"""


@pytest.fixture
def custom_model(tiny_llama, tmp_path) -> tuple[Path, Path]:
    """(model folder with custom code, marker file that appears if that code runs)."""
    folder = tmp_path / "custom-model"
    shutil.copytree(tiny_llama, folder)
    marker = tmp_path / "CODE-RAN"
    (folder / "custom_llama.py").write_text(MODULE.format(marker=str(marker)))
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(
        model_type="chunkwise_fault_custom",
        architectures=["CustomForCausalLM"],
        auto_map={
            "AutoConfig": "custom_llama.CustomConfig",
            "AutoModelForCausalLM": "custom_llama.CustomForCausalLM",
        },
    )
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder, marker


@pytest.fixture
def adapter_over_custom(custom_model, tiny_llama, tmp_path, save_random_lora) -> Path:
    adapter = save_random_lora(tiny_llama, tmp_path / "adapter")
    folder, _ = custom_model
    (adapter / "chunkwise_model.json").write_text(
        json.dumps({"base": f"hf:{folder}?trust_remote_code=1&ctx=128"})
    )
    cfg = json.loads((adapter / "adapter_config.json").read_text())
    cfg["base_model_name_or_path"] = f"{folder}?trust_remote_code=1"
    (adapter / "adapter_config.json").write_text(json.dumps(cfg))
    return adapter


def test_base_spec_in_chunkwise_model_json_cannot_enable_remote_code(
    adapter_over_custom, custom_model, caplog
):
    _, marker = custom_model
    with pytest.raises(BadInput, match=r"add \?trust_remote_code=1 to your --model spec"):
        load_llm(str(adapter_over_custom))
    assert not marker.exists(), "code from the model folder ran"
    assert "ignoring option(s) trust_remote_code=1" in caplog.text


def test_base_in_adapter_config_json_cannot_enable_remote_code(adapter_over_custom, custom_model):
    _, marker = custom_model
    (adapter_over_custom / "chunkwise_model.json").unlink()
    with pytest.raises(BadInput, match="trust_remote_code"):
        load_llm(str(adapter_over_custom))
    assert not marker.exists(), "code from the model folder ran"


def test_cli_generate_on_the_folder_is_one_line_and_runs_nothing(
    cli, adapter_over_custom, custom_model
):
    _, marker = custom_model
    res = cli("generate", "--model", adapter_over_custom, "--prompt", "hi")
    assert "needs its own Python code" in res.error_line()
    assert not marker.exists()


def test_custom_code_model_without_trust_is_a_clear_bad_input(custom_model):
    folder, marker = custom_model
    with pytest.raises(BadInput) as e:
        load_llm(f"hf:{folder}")
    assert f"hf:{folder}?trust_remote_code=1" in str(e.value) and "\n" not in str(e.value)
    assert not marker.exists()


def test_the_users_own_spec_still_trusts(custom_model, adapter_over_custom):
    folder, marker = custom_model
    llm = load_llm(f"hf:{folder}?trust_remote_code=1&ctx=128")
    assert marker.exists() and llm.context_window == 128
    assert llm.complete("The sky is", max_new_tokens=2).completion_tokens <= 2
    # the user's trust on the adapter folder reaches its base; the file's own ctx still applies
    llm = load_llm(f"hf:{adapter_over_custom}?trust_remote_code=1")
    assert type(llm.model).__name__ == "CustomForCausalLM" and llm.context_window == 128


def test_file_options_keep_data_and_drop_code():
    from chunkwise.llm.hf import _safe_from_file

    opts = {"ctx": "512", "trust_remote_code": "1", "attn": "kernels-community/x", "dtype": "x"}
    assert file_options(opts, "f", _safe_from_file) == {"ctx": "512", "dtype": "x"}
    assert file_options({"attn": "sdpa"}, "f", _safe_from_file) == {"attn": "sdpa"}
    assert file_options({"trust_remote_code": "1", "tp": "2"}, "f") == {"tp": "2"}


def test_vllm_backend_takes_no_code_option_from_the_folder_either(tmp_path):
    from chunkwise.llm.spec import parse_spec
    from chunkwise.llm.vllm_backend import _resolve

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    (adapter / "chunkwise_model.json").write_text(
        json.dumps({"base": "hf:/models/base?trust_remote_code=1&max_model_len=512"})
    )
    got = _resolve(parse_spec(f"vllm:{adapter}"))
    assert got.options == {"max_model_len": "512"} and got.adapter == str(adapter)
    mine = _resolve(parse_spec(f"vllm:{adapter}?trust_remote_code=1"))
    assert mine.options["trust_remote_code"] == "1"  # the user's own spec still can
    (adapter / "chunkwise_model.json").write_bytes(b"[" * 200_000)
    with pytest.raises(BadInput, match="names no base model"):
        _resolve(parse_spec(f"vllm:{adapter}"))
