"""The memory plan: model states per GPU equal DeepSpeed's own estimators (the functions its
``estimate_zero{2,3}_model_states_mem_needs_all_live`` print from, fed by DeepSpeed's own
parameter count of a live tiny model), the meta-device model has Llama-3.1-8B's 8.03B
parameters, and ``chunkwise train --plan`` prints a table for an 8B recipe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chunkwise.cli import main
from chunkwise.train.modeling import arch_config
from chunkwise.train.plan import layer_sizes, meta_model, model_states, shape_of
from chunkwise.train.recipe import load_recipe

pytest.importorskip("deepspeed")

REPO = Path(__file__).resolve().parents[2]
RECIPE_8B = REPO / "recipes" / "llama3.1-8b" / "pyramid_align-mapreduce.yaml"


@pytest.fixture(scope="module")
def tiny_live():
    import torch
    from transformers import LlamaForCausalLM

    cfg = arch_config("tiny", {}, vocab_size=1024)
    torch.manual_seed(0)
    return cfg, LlamaForCausalLM(cfg)


@pytest.mark.parametrize("gpus", [1, 2, 8])
def test_model_states_match_deepspeed_estimators(tiny_live, gpus, capsys):
    from deepspeed.runtime.zero.stage3 import (
        estimate_zero3_model_states_mem_needs,
        estimate_zero3_model_states_mem_needs_all_live,
    )
    from deepspeed.runtime.zero.stage3 import model_to_params as z3_params
    from deepspeed.runtime.zero.stage_1_and_2 import (
        estimate_zero2_model_states_mem_needs,
        estimate_zero2_model_states_mem_needs_all_live,
    )
    from deepspeed.runtime.zero.stage_1_and_2 import model_to_params as z2_params

    cfg, live = tiny_live
    psi, largest = layer_sizes(meta_model(cfg))  # ours, on the meta device
    assert z3_params(live) == (psi, largest) and z2_params(live) == psi  # DeepSpeed's, live

    def ours(engine):
        p, g, o, host = model_states(engine, gpus, psi, largest)
        return p + g + o, host

    _, gpu = estimate_zero2_model_states_mem_needs(psi, gpus, 1, cpu_offload=False)
    assert ours("deepspeed-zero2")[0] == pytest.approx(gpu, abs=1)
    cpu, gpu = estimate_zero2_model_states_mem_needs(psi, gpus, 1, cpu_offload=True)
    assert ours("deepspeed-zero2-offload") == pytest.approx((gpu, cpu), abs=1)
    _, gpu, _ = estimate_zero3_model_states_mem_needs(psi, largest, gpus, 1, cpu_offload=False)
    assert ours("deepspeed-zero3")[0] == pytest.approx(gpu, abs=1)
    cpu, gpu, _ = estimate_zero3_model_states_mem_needs(
        psi, largest, gpus, 1, cpu_offload=True, cpu_offload_params=True, zero_init=True
    )
    assert ours("deepspeed-zero3-offload") == pytest.approx((gpu, cpu), abs=1)
    # the printing estimators run on the same live model (their tables round to 0.01 GB)
    estimate_zero2_model_states_mem_needs_all_live(live, num_gpus_per_node=gpus)
    estimate_zero3_model_states_mem_needs_all_live(live, num_gpus_per_node=gpus)
    assert "per GPU" in capsys.readouterr().out


def test_meta_model_has_llama31_8b_shapes():
    shape = shape_of(load_recipe(RECIPE_8B, check_paths=False), RECIPE_8B)
    assert shape.params == 8_030_261_248
    assert (shape.layers, shape.hidden, shape.kv_dim, shape.vocab) == (32, 4096, 1024, 128256)


def test_plan_command_prints_a_table_and_json(capsys):
    zero3 = str(REPO / "configs" / "accelerate" / "zero3.yaml")
    args = ["train", "--plan", str(RECIPE_8B), "--config_file", zero3, "--num_processes", "8"]
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "| llama3.1-8b-pyramid_align-mapreduce | deepspeed-zero3 | 8 | full |" in table
    assert main([*args, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["mode"] for r in rows] == ["full", "lora"]
    full = rows[0]
    assert full["params_gb"] == pytest.approx((2 * 8_030_261_248 / 8 + 4 * 525_336_576) / 1e9)
    assert full["fits_80gb_ckpt"] and not full["fits_80gb_no_ckpt"]
    assert main(["train", "--plan", str(RECIPE_8B)]) == 2  # no --config_file
