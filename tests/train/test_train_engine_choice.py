"""Which engine a launch asks for and gets (no processes started): every accelerate config of
the repo goes through accelerate's own config loader and launch parser, and the environment
its launcher would set names the engine the config means; a run that would train with another
engine is an error, never a silent downgrade."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunkwise.errors import BadInput, MissingDependency
from chunkwise.train import engine
from chunkwise.train.engine import check_ulysses, load_dtype, requested_engine

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "configs" / "accelerate"

EXPECTED = {
    "ddp": "ddp",
    "fsdp2": "fsdp2",
    "ulysses": "deepspeed-zero3",
    "zero2": "deepspeed-zero2",
    "zero3": "deepspeed-zero3",
    "zero3_offload": "deepspeed-zero3-offload",
}


def launch_env(config: Path) -> dict[str, str]:
    """The environment ``accelerate launch --config_file CONFIG --num_processes 2`` gives."""
    return engine.launch_env(config, 2)


def test_every_config_loads_through_accelerate_and_has_only_known_keys():
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import launch_command_parser

    dests = {a.dest for a in launch_command_parser()._actions}
    found = sorted(p.stem for p in CONFIGS.glob("*.yaml"))
    assert found == sorted(EXPECTED)
    for name in found:
        cfg = load_config_from_file(str(CONFIGS / f"{name}.yaml"))  # unknown top-level keys raise
        nested: dict = {}
        for section in ("deepspeed_config", "fsdp_config", "parallelism_config"):
            nested.update(getattr(cfg, section, None) or {})
        # accelerate copies nested keys onto its launch args without a check: a typo would pass
        assert sorted(set(nested) - dests) == [], name


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_config_asks_for_its_engine(name):
    assert requested_engine(launch_env(CONFIGS / f"{name}.yaml")) == EXPECTED[name]


def test_fsdp2_checkpoints_are_sharded():
    env = launch_env(CONFIGS / "fsdp2.yaml")
    assert env["FSDP_STATE_DICT_TYPE"] == "SHARDED_STATE_DICT"
    assert env["FSDP_VERSION"] == "2"


def test_requested_engine_without_a_launcher():
    assert requested_engine({}) == "single"
    assert requested_engine({"WORLD_SIZE": "4"}) == "ddp"


def test_a_deepspeed_launch_that_would_run_as_ddp_is_an_error(monkeypatch):
    """The old loop built Accelerator(cpu=True), which drops DeepSpeed without a word."""
    from accelerate import Accelerator

    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    monkeypatch.setenv("DS_ACCELERATOR", "cpu")
    monkeypatch.setattr(engine, "engine_name", lambda acc: "single")
    monkeypatch.setattr(Accelerator, "__init__", lambda self, *a, **k: None)
    with pytest.raises(BadInput, match="asked for deepspeed-zero3 but .* single"):
        engine.build_accelerator()


def test_load_dtype_puts_lora_bases_in_bf16_on_gpu():
    assert load_dtype("auto", cuda=True, engine="ddp", lora=True) == "bfloat16"
    assert load_dtype("auto", cuda=True, engine="fsdp2", lora=True) == "bfloat16"
    assert load_dtype("auto", cuda=True, engine="deepspeed-zero3", lora=False) == "bfloat16"
    assert load_dtype("auto", cuda=True, engine="fsdp2", lora=False) == "float32"
    assert load_dtype("auto", cuda=False, engine="ddp", lora=True) == "float32"
    assert load_dtype("float32", cuda=True, engine="ddp", lora=True) == "float32"


def test_load_dtype_puts_lora_bases_in_bf16_under_cpu_autocast():
    assert load_dtype("auto", cuda=False, engine="single", lora=True, precision="bf16") == (
        "bfloat16"
    )
    assert load_dtype("auto", cuda=False, engine="single", lora=True, precision="fp32") == (
        "float32"
    )
    # full fine-tuning keeps fp32 weights (the optimizer updates them)
    assert load_dtype("auto", cuda=False, engine="single", lora=False, precision="bf16") == (
        "float32"
    )
    assert load_dtype("float32", cuda=False, engine="single", lora=True, precision="bf16") == (
        "float32"
    )


def test_ulysses_without_flash_attn_says_so():
    env = launch_env(CONFIGS / "ulysses.yaml")
    with pytest.raises(MissingDependency, match="flash-attn .*Ulysses.*sdpa"):
        check_ulysses(env, cuda=False, flash_attn=False)
    check_ulysses(env, cuda=True, flash_attn=True)
    check_ulysses(
        {**env, "PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION": "sdpa"}, cuda=False, flash_attn=False
    )
    check_ulysses(launch_env(CONFIGS / "zero3.yaml"), cuda=False, flash_attn=False)


def test_fast_bf16_follows_the_cpus_native_bf16(monkeypatch):
    """On CPU, bf16 autocast only where oneDNN has native bf16 (emulated bf16 is slower)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for native in (True, False):
        monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda n=native: n)
        assert engine.fast_bf16() is native

    def gone() -> bool:
        raise RuntimeError("no oneDNN")

    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", gone)
    assert engine.fast_bf16() is False
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert engine.fast_bf16() is True
