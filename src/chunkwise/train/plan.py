"""A memory plan for a recipe on an accelerate config, before any GPU is touched.

``chunkwise train --plan RECIPE --config_file CFG --num_processes N`` builds the recipe's model
on the meta device (no weights, no network: a random-init recipe from its arch preset, a
pretrained one from the model folder's ``config.json`` or a ``model_config.json`` next to the
recipe) and prints per-GPU bytes of parameters, gradients, optimizer states and activations at
the recipe's tokens per micro-batch, for full fine-tuning and LoRA, with and without gradient
checkpointing, and whether that fits 80 GB / 141 GB GPUs.

Model states (bf16 training with fp32 Adam; Psi = parameters, L = largest layer's parameters,
N = data-parallel GPUs) follow DeepSpeed's own estimators for full fine-tuning:

* ``deepspeed-zero2``: params 2 Psi, grads 6 Psi / N, optimizer 12 Psi / N (= 2 Psi + 18 Psi / N)
* ``deepspeed-zero3``: params 2 Psi / N + 4 L (gathered layer), grads 4 Psi / N, optimizer
  12 Psi / N (= 4 L + 18 Psi / N)
* ``deepspeed-zero3-offload``: 4 L on the GPU; 18 Psi x 1.5 in host memory per node
* ``ddp``: fp32 weights with bf16 autocast: params 4 Psi, grads 4 Psi, optimizer 8 Psi
* ``fsdp2``: the ddp states divided by N, plus two bf16 layers gathered (current + prefetch)

LoRA: the frozen base in bf16 (sharded like the params above), and 16 bytes per trainable
parameter (fp32 weight, grad, two moments), sharded like the engine shards optimizer states.

Activations per GPU (bf16, per-sequence flash/SDPA attention, so no T x T matrix): without
checkpointing every decoder layer keeps ``6h + 2 kv + 4 I`` values per token; with it, each
layer keeps its input (``h`` per token) and one layer is recomputed at a time; plus the logits
of one cross-entropy chunk (fp32, forward and gradient). Ulysses divides the tokens by sp.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput
from chunkwise.train.recipe import Recipe

GB = 1e9
GPU_SIZES_GB = (80, 141)


@dataclass
class ModelShape:
    params: int
    largest_layer: int
    layers: int
    hidden: int
    kv_dim: int
    intermediate: int
    vocab: int
    lora_params: int


def model_config(recipe: Recipe, recipe_path: str | Path | None = None) -> Any:
    """The recipe's model config without weights or network."""
    from transformers import AutoConfig

    from chunkwise.train.modeling import arch_config

    m = recipe.model
    if m.init == "random":
        vocab = m.tokenizer_vocab_size if m.tokenizer == "train" else None
        return arch_config(m.arch, m.arch_overrides, vocab_size=vocab or 32000)
    candidates = []
    p = Path(m.name_or_path).expanduser()
    if (p / "config.json").exists():
        candidates.append(p / "config.json")
    if recipe_path is not None:
        candidates.append(Path(recipe_path).parent / "model_config.json")
    for c in candidates:
        if c.exists():
            return AutoConfig.from_pretrained(str(c))
    raise BadInput(
        f"model.name_or_path {m.name_or_path!r}: the plan needs the model's config.json "
        "(a local model folder, or model_config.json next to the recipe)"
    )


def meta_model(config: Any) -> Any:
    """The causal LM of ``config`` on the meta device (shapes only)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)


def layer_sizes(model: Any) -> tuple[int, int]:
    """(all parameters, largest module's own parameters), as DeepSpeed's estimators count."""
    seen: dict[int, int] = {}
    for p in model.parameters():
        seen[id(p)] = p.numel()
    largest = max(
        (sum(p.numel() for p in mod.parameters(recurse=False)) for mod in model.modules()),
        default=0,
    )
    return sum(seen.values()), largest


def lora_param_count(model: Any, targets: list[str], r: int) -> int:
    """Parameters LoRA adds: r x (in + out) for every targeted linear layer."""
    import torch

    n = 0
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Linear) and name.rsplit(".", 1)[-1] in targets:
            n += r * (mod.in_features + mod.out_features)
    return n


def shape_of(recipe: Recipe, recipe_path: str | Path | None = None) -> ModelShape:
    cfg = model_config(recipe, recipe_path)
    model = meta_model(cfg)
    params, largest = layer_sizes(model)
    heads = cfg.num_attention_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    kv = (getattr(cfg, "num_key_value_heads", None) or heads) * head_dim
    lora = recipe.model.lora
    return ModelShape(
        params=params,
        largest_layer=largest,
        layers=cfg.num_hidden_layers,
        hidden=cfg.hidden_size,
        kv_dim=kv,
        intermediate=cfg.intermediate_size,
        vocab=cfg.vocab_size,
        lora_params=lora_param_count(model, list(lora.target_modules), lora.r),
    )


def model_states(engine: str, n: int, psi: int, largest: int, trainable: int | None = None):
    """Per-GPU bytes (params, grads, optimizer) and host bytes per node of the model states;
    ``trainable=None`` is full fine-tuning, else LoRA with that many trainable parameters."""
    n = max(1, n)
    host = 0.0
    if trainable is None:
        if engine == "deepspeed-zero2":
            p, g, o = 2 * psi, 6 * psi / n, 12 * psi / n
        elif engine == "deepspeed-zero2-offload":
            p, g, o = 2 * psi, 0, 0
            host = psi * max(4 * n, 16) * 1.5
        elif engine == "deepspeed-zero3":
            p, g, o = 2 * psi / n + 4 * largest, 4 * psi / n, 12 * psi / n
        elif engine == "deepspeed-zero3-offload":
            p, g, o = 4 * largest, 0, 0
            host = psi * 18 * 1.5
        elif engine == "fsdp2":
            p, g, o = 4 * psi / n + 2 * 2 * largest, 4 * psi / n, 8 * psi / n
        else:  # ddp / single
            p, g, o = 4 * psi, 4 * psi, 8 * psi
        return p, g, o, host
    t = trainable
    if engine in ("deepspeed-zero3", "fsdp2"):
        base = 2 * psi / n + (4 if engine == "deepspeed-zero3" else 2 * 2) * largest
        return base + 4 * t / n, 4 * t / n, 8 * t / n, 0.0
    if engine == "deepspeed-zero3-offload":
        return 4 * largest, 0, 0, (2 * psi + 16 * t) * 1.5
    if engine.startswith("deepspeed-zero2"):
        return 2 * psi + 2 * t, 4 * t / n, 12 * t / n, 0.0
    return 2 * psi + 4 * t, 4 * t, 8 * t, 0.0


def activations(shape: ModelShape, tokens: int, ce_chunk: int, checkpointing: bool) -> float:
    """Per-GPU activation bytes for ``tokens`` tokens in one micro-batch (see module doc)."""
    per_layer_token = 6 * shape.hidden + 2 * shape.kv_dim + 4 * shape.intermediate
    logits = min(ce_chunk, tokens) * shape.vocab * 4 * 2
    if checkpointing:
        saved = shape.layers * tokens * shape.hidden * 2
        return saved + per_layer_token * tokens * 2 + logits
    return shape.layers * per_layer_token * tokens * 2 + logits


def micro_batch_tokens(recipe: Recipe) -> int:
    b = recipe.batching
    if b.strategy == "packed":
        return b.max_tokens
    return b.batch_size * recipe.data.max_length


def plan_rows(
    recipe: Recipe,
    recipe_path: str | Path | None,
    config_file: str | Path,
    num_processes: int,
) -> list[dict[str, Any]]:
    from chunkwise.train.engine import launch_env, requested_engine

    env = launch_env(config_file, num_processes)
    engine = requested_engine(env)
    sp = int(env.get("PARALLELISM_CONFIG_SP_SIZE", "1") or 1)
    dp = max(1, num_processes // sp)
    shape = shape_of(recipe, recipe_path)
    tokens = math.ceil(micro_batch_tokens(recipe) / sp)
    rows = []
    for mode in ("full", "lora"):
        trainable = None if mode == "full" else shape.lora_params
        shard = num_processes if engine.startswith("deepspeed") else dp
        p, g, o, host = model_states(engine, shard, shape.params, shape.largest_layer, trainable)
        a_ckpt = activations(shape, tokens, recipe.train.ce_chunk_tokens, True)
        a_full = activations(shape, tokens, recipe.train.ce_chunk_tokens, False)
        total_ckpt, total_full = p + g + o + a_ckpt, p + g + o + a_full
        rows.append(
            {
                "recipe": recipe.run_name,
                "engine": engine,
                "gpus": num_processes,
                "sp": sp,
                "mode": mode,
                "params_total": shape.params,
                "trainable": shape.params if trainable is None else trainable,
                "tokens_per_gpu": tokens,
                "params_gb": p / GB,
                "grads_gb": g / GB,
                "optimizer_gb": o / GB,
                "activations_ckpt_gb": a_ckpt / GB,
                "activations_no_ckpt_gb": a_full / GB,
                "total_ckpt_gb": total_ckpt / GB,
                "total_no_ckpt_gb": total_full / GB,
                "host_per_node_gb": host / GB,
                **{f"fits_{s}gb_ckpt": total_ckpt <= s * GB for s in GPU_SIZES_GB},
                **{f"fits_{s}gb_no_ckpt": total_full <= s * GB for s in GPU_SIZES_GB},
            }
        )
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| recipe | engine | GPUs | mode | tokens/GPU | params | grads | optimizer "
        "| act. (ckpt / none) | total (ckpt / none) | host/node | fits 80 GB | fits 141 GB |"
    )
    lines = [head, "|" + "---|" * 13]

    def yn(r: dict, s: int) -> str:
        return ("yes" if r[f"fits_{s}gb_ckpt"] else "no") + (
            " / yes" if r[f"fits_{s}gb_no_ckpt"] else " / no"
        )

    for r in rows:
        lines.append(
            f"| {r['recipe']} | {r['engine']} | {r['gpus']} | {r['mode']} | "
            f"{r['tokens_per_gpu']} | {r['params_gb']:.1f} | {r['grads_gb']:.1f} | "
            f"{r['optimizer_gb']:.1f} | {r['activations_ckpt_gb']:.1f} / "
            f"{r['activations_no_ckpt_gb']:.1f} | {r['total_ckpt_gb']:.1f} / "
            f"{r['total_no_ckpt_gb']:.1f} | {r['host_per_node_gb']:.0f} | {yn(r, 80)} | "
            f"{yn(r, 141)} |"
        )
    lines.append("GB = 1e9 bytes per GPU; fits: with / without gradient checkpointing")
    return "\n".join(lines)


def to_json(rows: list[dict[str, Any]]) -> str:
    return json.dumps(rows, indent=1)


__all__ = [
    "activations",
    "format_table",
    "layer_sizes",
    "model_states",
    "plan_rows",
    "shape_of",
]
