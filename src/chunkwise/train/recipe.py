"""What a training run is: a recipe YAML validated into these dataclasses.

``load_recipe(path, ["--train.lr=1e-5", ...])`` reads the YAML, applies ``--key=value``
overrides and validates the result; unknown keys and wrong types are errors that name the key
(:func:`chunkwise.config.load_config`). :func:`check_recipe` then checks what types cannot:
dataset paths exist, the pack budget holds the longest sequence, options fit together. Both run
before any model is loaded, so a bad recipe fails in seconds, not after GPU time is spent.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from chunkwise.config import load_config
from chunkwise.config.convert import InvalidOption
from chunkwise.errors import BadInput

#: decoder projection names shared by Llama-family models (LoRA targets)
LLAMA_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


#: the stages an example can come from (TextExample.stage)
STAGES = ("standard", "chat", "map", "collapse", "reduce", "single")


def _at_least(key: str, value: float, low: float) -> None:
    if value < low:
        raise InvalidOption(key, value, f"a whole number >= {low:g}")


def _within(key: str, value: float, ok: bool, interval: str) -> None:
    if not ok:
        raise InvalidOption(key, value, f"a number in {interval}")


@dataclass
class LoraConfig:
    #: train a LoRA adapter instead of every weight
    enabled: bool = False
    #: LoRA rank
    r: int = 16
    #: LoRA scaling numerator (the update is scaled by alpha / r)
    alpha: int = 32
    #: dropout on the LoRA input
    dropout: float = 0.05
    #: module names that get adapters (default: Llama's attention and MLP projections)
    target_modules: list[str] = field(default_factory=lambda: list(LLAMA_LINEAR))
    #: tokens whose embedding rows train too (peft trainable tokens; with tied embeddings the
    #: output row follows). A base model has never produced its chat template's end-of-turn
    #: token, and LoRA on the linear layers alone learns to emit it very slowly.
    trainable_tokens: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.enabled:
            _at_least("r", self.r, 1)


@dataclass
class ModelConfig:
    #: local folder or hub id of the starting checkpoint (init=pretrained); ``default`` = the
    #: embedded offline Gemma-3-270M (what ``hf:default`` decodes with)
    name_or_path: str = ""
    #: pretrained: load name_or_path; random: build ``arch`` with fresh weights (tests, benches)
    init: Literal["pretrained", "random"] = "pretrained"
    #: architecture preset for init=random
    arch: Literal["tiny", "llama3.1-8b"] = "tiny"
    #: LlamaConfig fields that replace the preset's (e.g. num_hidden_layers: 4)
    arch_overrides: dict[str, Any] = field(default_factory=dict)
    #: tokenizer folder or hub id ("" = name_or_path); "train" = a byte-level BPE trained on
    #: the training data in-process (tiny recipes)
    tokenizer: str = ""
    #: vocabulary size of a tokenizer trained in-process (tokenizer: train)
    tokenizer_vocab_size: int = 1024
    #: auto: the tokenizer's own template, else the built-in llama3 one when the tokenizer has
    #: Llama-3 header tokens, else none (plain prompts); none; llama3; or a .jinja file
    chat_template: str = "auto"
    #: weights as loaded; auto: bf16 on CUDA under DeepSpeed and for LoRA bases, else fp32
    dtype: Literal["auto", "bfloat16", "float32"] = "auto"
    #: auto: flash_attention_2 on CUDA when flash-attn is installed, else chunkwise_varlen (causal
    #: SDPA per packed sequence, exact); sdpa / eager use transformers' block-diagonal mask
    attn_implementation: Literal[
        "auto", "chunkwise_varlen", "sdpa", "eager", "flash_attention_2", "flash_attention_3"
    ] = "auto"
    #: recompute activations in the backward pass instead of keeping them
    gradient_checkpointing: bool = True
    #: with gradient_checkpointing: keep the checkpointed layer inputs in CPU memory (long contexts)
    activation_offload: bool = False
    #: Liger kernels (RMSNorm, RoPE, SwiGLU) and Liger cross-entropy: auto = when installed on CUDA
    liger: Literal["auto", "on", "off"] = "auto"
    #: run Python code shipped with the checkpoint (only for models you trust)
    trust_remote_code: bool = False
    #: LoRA settings
    lora: LoraConfig = field(default_factory=LoraConfig)

    def __post_init__(self) -> None:
        _at_least("tokenizer_vocab_size", self.tokenizer_vocab_size, 64)


@dataclass
class DataConfig:
    #: JSONL files or folders of *.jsonl (LongAlign ``messages`` or Pyramid-Align records)
    paths: list[str] = field(default_factory=list)
    #: record format: auto (from the records), longalign (messages) or pyramid_align
    format: Literal["auto", "longalign", "pyramid_align"] = "auto"
    #: standard: instruction + document + question -> answer; mapreduce: the MapReduce stages
    mode: Literal["standard", "mapreduce"] = "standard"
    #: stages: one example per map record, per collapse group, and the reduce; single: one
    #: sequence (document, question -> intermediate records then answer)
    mapreduce_format: Literal["stages", "single"] = "stages"
    #: prompt kind: chat (the tokenizer has a chat template) or base (plain completion prompts)
    prompts: Literal["auto", "chat", "base"] = "auto"
    #: options of the mapreduce strategy, exactly as decoding gets them (protocol, calibration, ...)
    mapreduce: dict[str, Any] = field(default_factory=dict)
    #: decoding window, only to re-chunk a document whose map records carry no ``chunk`` text and
    #: whose meta has no ``chunk_budget``
    window: int = 8192
    #: longest training sequence in tokens
    max_length: int = 65536
    #: a longer example: truncate (cut the middle of its longest prompt span), skip, or error
    overlong: Literal["truncate", "skip", "error"] = "truncate"
    #: read at most this many records (0 = all)
    limit: int = 0
    #: mapreduce mode: the share of map examples whose target says NO INFORMATION to keep (0-1;
    #: the same examples every run, chosen by a hash of their id). Most chunks of a long document
    #: hold nothing, so without this the map examples teach mostly "nothing here"
    no_information_keep: float = 1.0
    #: mapreduce mode: per family (a record's ``meta.family``), a share that replaces
    #: no_information_keep for that family's NO-INFORMATION map examples, e.g. ``{kv_retrieval:
    #: 0.5}``: a kv part without the asked key is the negative that teaches the map not to answer
    #: the question's own key (issue #49), whatever the question's wording
    no_information_keep_by_family: dict[str, float] = field(default_factory=dict)
    #: mapreduce mode: more Pyramid-Align files (as in ``paths``) of which only the reduce is
    #: taught: their map and collapse outputs are the reduce's input, not targets. A document
    #: yields one map example per chunk but one reduce, so this is how the step that combines
    #: findings gets more examples without paying for every chunk again
    reduce_only_paths: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        _at_least("max_length", self.max_length, 16)
        _at_least("window", self.window, 64)
        keep = self.no_information_keep
        _within("no_information_keep", keep, 0 < keep <= 1, "(0, 1]")
        for fam, share in self.no_information_keep_by_family.items():
            ok = isinstance(share, (int, float)) and 0 < share <= 1
            _within(f"no_information_keep_by_family.{fam}", share, ok, "(0, 1]")


@dataclass
class BatchingConfig:
    #: packed: best-fit-decreasing packs, one pack per micro-batch, no attention across sequences;
    #: sorted: length-sorted padded batches (LongAlign's alternative); padded: shuffled padded batches
    strategy: Literal["packed", "sorted", "padded"] = "packed"
    #: packed: tokens per pack (>= data.max_length)
    max_tokens: int = 65536
    #: sorted / padded: sequences per micro-batch
    batch_size: int = 1
    #: pad each row to a multiple of this (8 for tensor cores; sp_size is applied on top)
    pad_to_multiple_of: int = 1

    def __post_init__(self) -> None:
        _at_least("max_tokens", self.max_tokens, 16)
        _at_least("batch_size", self.batch_size, 1)
        _at_least("pad_to_multiple_of", self.pad_to_multiple_of, 1)


@dataclass
class TrainConfig:
    #: passes over the data (0: max_steps decides)
    epochs: int = 2
    #: stop after this many optimizer steps (0 = epochs x steps per epoch)
    max_steps: int = 0
    #: peak learning rate
    lr: float = 2e-5
    #: cosine decays to lr x min_lr_ratio
    min_lr_ratio: float = 0.0
    #: share of the steps spent warming the learning rate up
    warmup_ratio: float = 0.03
    #: overrides warmup_ratio when > 0
    warmup_steps: int = 0
    #: AdamW weight decay
    weight_decay: float = 0.0
    #: AdamW betas
    adam_betas: tuple[float, float] = (0.9, 0.95)
    #: AdamW epsilon
    adam_eps: float = 1e-8
    #: clip the gradient norm to this
    max_grad_norm: float = 1.0
    #: micro-batches per optimizer step
    grad_accum: int = 1
    #: sequence: every sequence counts equally (LongAlign); token: every target token does
    loss_weighting: Literal["sequence", "token"] = "sequence"
    #: per-stage weight of an example (stages: map, collapse, reduce, single, standard, chat);
    #: default 1 for every stage, i.e. LongAlign's rule (each sequence counts the same), so in
    #: mapreduce mode a record's reduce example gets 1/(chunks + collapses + 1) of its weight;
    #: e.g. {reduce: 4.0} raises the reduce step, {map: 0.5} lowers the (many) map examples
    stage_weights: dict[str, float] = field(default_factory=dict)
    #: seed of data order, dropout and initialisation
    seed: int = 42
    #: save a checkpoint every this many steps
    save_steps: int = 200
    #: keep this many checkpoints (0 = all)
    save_total_limit: int = 2
    #: auto: continue from the output folder's last checkpoint; never: start over
    resume: Literal["auto", "never"] = "auto"
    #: log metrics every this many steps
    log_steps: int = 1
    #: auto: bf16 on CUDA, fp32 on CPU
    precision: Literal["auto", "bf16", "fp32"] = "auto"
    #: peak FLOP/s per device for MFU, in TFLOP/s; None = the GPU table (CPU: no MFU)
    peak_tflops: float | None = None
    #: rows of logits per cross-entropy chunk (bounds the fp32 copy of the logits)
    ce_chunk_tokens: int = 8192
    #: minutes a rank waits in a collective before the run fails (the process group's timeout).
    #: Rank 0 tokenizes the whole corpus while the other ranks wait at a barrier, so this must
    #: outlast that: 180 covers LongAlign-10k's worst case (10k records x 64K tokens, ~655M
    #: tokens) at the ~90K tokens/s measured for MapReduce stages (docs/training.md), with
    #: half again to spare; NCCL's own default is 10
    timeout_minutes: float = 180.0

    def __post_init__(self) -> None:
        for key in ("grad_accum", "save_steps", "log_steps", "ce_chunk_tokens"):
            _at_least(key, getattr(self, key), 1)
        for key in ("max_steps", "epochs", "warmup_steps", "save_total_limit"):
            _at_least(key, getattr(self, key), 0)
        _within("warmup_ratio", self.warmup_ratio, 0 <= self.warmup_ratio < 1, "[0, 1)")
        _within("min_lr_ratio", self.min_lr_ratio, 0 <= self.min_lr_ratio <= 1, "[0, 1]")
        if self.lr <= 0:
            raise InvalidOption("lr", self.lr, "a number > 0")
        if not self.timeout_minutes > 0:
            raise InvalidOption("timeout_minutes", self.timeout_minutes, "a number > 0")


@dataclass
class WandbConfig:
    #: wandb project
    project: str = "chunkwise"
    #: auto: $WANDB_MODE if set, else offline
    mode: Literal["auto", "online", "offline", "disabled"] = "auto"
    #: wandb group
    group: str = ""
    #: wandb tags
    tags: list[str] = field(default_factory=list)


@dataclass
class Recipe:
    #: where checkpoints, logs and the final model go ("" = runs/train/<run_name>)
    output_dir: str = ""
    #: the run's name (wandb, the default output_dir)
    run_name: str = "sft"
    #: what to train
    model: ModelConfig = field(default_factory=ModelConfig)
    #: what to train on
    data: DataConfig = field(default_factory=DataConfig)
    #: how examples become micro-batches
    batching: BatchingConfig = field(default_factory=BatchingConfig)
    #: the optimisation
    train: TrainConfig = field(default_factory=TrainConfig)
    #: Weights & Biases logging
    wandb: WandbConfig = field(default_factory=WandbConfig)


def load_recipe(
    path: str | Path | None,
    overrides: list[str] | tuple[str, ...] = (),
    *,
    check_paths: bool = True,
) -> Recipe:
    """Read, override and validate a recipe (types and keys), then :func:`check_recipe` it
    (``check_paths=False``: without requiring the data files, e.g. for a memory plan)."""
    recipe = load_config(Recipe, path, list(overrides))
    if not recipe.output_dir:
        recipe.output_dir = str(Path("runs") / "train" / recipe.run_name)
    check_recipe(recipe, check_paths=check_paths)
    return recipe


def data_files(paths: list[str], name: str = "data.paths") -> list[Path]:
    """The JSONL files named by ``data.paths`` (files, folders of *.jsonl, or globs);
    ``name``: the recipe key the paths come from, for errors."""
    files: list[Path] = []
    for i, raw in enumerate(paths):
        key = f"{name}[{i}]"
        p = Path(os.path.expanduser(raw))
        if any(c in raw for c in "*?["):
            hits = sorted(Path(h) for h in glob.glob(os.path.expanduser(raw), recursive=True))
            if not hits:
                raise BadInput(f"{key}: no file matches {raw!r}")
            files.extend(h for h in hits if h.is_file())
        elif p.is_dir():
            found = sorted(p.glob("*.jsonl"))
            if not found:
                raise BadInput(f"{key}: folder {raw!r} holds no *.jsonl file")
            files.extend(found)
        elif p.is_file():
            files.append(p)
        else:
            raise BadInput(
                f"{key}: dataset path {raw!r} does not exist (relative paths are read from "
                f"{Path.cwd()}); download or generate the data first, or fix the recipe"
            )
    return files


def training_files(d: DataConfig) -> list[Path]:
    """Every file training reads: ``data.paths`` then ``data.reduce_only_paths``."""
    return data_files(d.paths) + data_files(d.reduce_only_paths, "data.reduce_only_paths")


def check_recipe(r: Recipe, *, check_paths: bool = True) -> None:
    """Checks across keys that the type system cannot express; raises BadInput naming the key.
    ``check_paths=False`` skips the existence of dataset files (to lint recipes without data)."""
    m, d, b, t = r.model, r.data, r.batching, r.train
    if not d.paths:
        raise BadInput("data.paths is empty: name at least one JSONL file or folder")
    if check_paths:
        taught = {f.resolve() for f in data_files(d.paths)}
        both = taught & {
            f.resolve() for f in data_files(d.reduce_only_paths, "data.reduce_only_paths")
        }
        if both:
            raise BadInput(
                "data.reduce_only_paths names files data.paths names too: "
                + ", ".join(sorted(map(str, both)))
            )
    if d.reduce_only_paths and d.mode != "mapreduce":
        raise BadInput("data.reduce_only_paths needs data.mode=mapreduce (it keeps their reduce)")
    if m.init == "pretrained" and not m.name_or_path:
        raise BadInput("model.name_or_path is required when model.init is 'pretrained'")
    if m.tokenizer == "" and m.init == "random" and not m.name_or_path:
        raise BadInput(
            "model.tokenizer: a randomly initialised model needs a tokenizer: a folder, "
            "a hub id, or 'train' to train one on the data"
        )
    # (one value's range is its section's own check, as the recipe is read)
    if t.epochs < 1 and t.max_steps < 1:
        raise BadInput("train.epochs and train.max_steps are both 0: set one of them")
    if b.strategy == "packed" and b.max_tokens < d.max_length:
        raise BadInput(
            f"batching.max_tokens ({b.max_tokens}) is below data.max_length ({d.max_length}): "
            "the longest sequence would not fit in a pack; raise batching.max_tokens"
        )
    for stage, w in t.stage_weights.items():
        if stage not in STAGES:
            raise BadInput(
                f"train.stage_weights: unknown stage {stage!r}; known: {', '.join(STAGES)}"
            )
        if not (isinstance(w, (int, float)) and w >= 0 and w == w and w != float("inf")):
            raise BadInput(f"train.stage_weights.{stage} must be a number >= 0, got {w!r}")
    if d.mode == "mapreduce" and d.format == "longalign":
        raise BadInput(
            "data.mode=mapreduce needs Pyramid-Align records (document, question, "
            "intermediate, answer); LongAlign records have no intermediate outputs"
        )
    if d.mapreduce:
        from chunkwise.strategies.mapreduce import MapReduce

        try:
            MapReduce(**d.mapreduce)
        except TypeError as e:
            raise BadInput(f"data.mapreduce: {e}") from None


__all__ = [
    "BatchingConfig",
    "DataConfig",
    "LoraConfig",
    "ModelConfig",
    "Recipe",
    "TrainConfig",
    "WandbConfig",
    "check_recipe",
    "data_files",
    "load_recipe",
    "training_files",
]
