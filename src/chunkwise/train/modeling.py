"""Tokenizer and model for a recipe: load a checkpoint or build a Llama shape with fresh weights.

Optional parts degrade cleanly: flash-attention is used only when installed on CUDA (else
PyTorch SDPA), Liger kernels only when installed on CUDA (``model.liger: on`` without them is
an error), LoRA goes through peft.
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput, MissingDependency
from chunkwise.train.recipe import Recipe
from chunkwise.train.tokenizer import end_ids, load_tokenizer, resolve_chat_template, train_bpe

log = logging.getLogger(__name__)

LLAMA31_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}

#: LlamaConfig fields per preset; "tiny" keeps Llama-3.1's RoPE and GQA at toy width
ARCH_PRESETS: dict[str, dict[str, Any]] = {
    "tiny": dict(
        hidden_size=64,
        intermediate_size=176,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=131072,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        rope_parameters=LLAMA31_ROPE,
    ),
    "llama3.1-8b": dict(
        hidden_size=4096,
        intermediate_size=14336,
        num_hidden_layers=32,
        num_attention_heads=32,
        num_key_value_heads=8,
        vocab_size=128256,
        max_position_embeddings=131072,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        rope_parameters=LLAMA31_ROPE,
    ),
}


def has_module(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def arch_config(preset: str, overrides: dict[str, Any], vocab_size: int | None = None) -> Any:
    from transformers import LlamaConfig

    if preset not in ARCH_PRESETS:
        raise BadInput(f"model.arch {preset!r}: known presets {', '.join(ARCH_PRESETS)}")
    fields = dict(ARCH_PRESETS[preset])
    if vocab_size is not None and "vocab_size" not in fields:
        fields["vocab_size"] = vocab_size
    fields.update(overrides)
    try:
        return LlamaConfig(**fields)
    except TypeError as e:
        raise BadInput(f"model.arch_overrides: {e}") from None


def attn_implementation(setting: str, cuda: bool) -> str:
    """The attention kernel name for transformers (registering ``chunkwise_varlen`` if used).

    ``auto`` takes flash_attention_2 on CUDA when flash-attn *imports* (a broken wheel is
    found but fails to import: then ``chunkwise_varlen``, with a warning naming the error)."""
    from chunkwise.train import attention
    from chunkwise.train.kernels import flash_attn_problem

    problem = flash_attn_problem() if cuda else "needs CUDA"
    if setting == "auto":
        setting = "flash_attention_2" if problem is None else attention.NAME
        if problem not in (None, "not installed", "needs CUDA"):
            log.warning("flash-attn is installed but unusable (%s): using %s", problem, setting)
    if setting.startswith("flash_attention") and problem is not None:
        raise MissingDependency(
            f"{setting} (model.attn_implementation: flash-attn {problem})",
            "pip install flash-attn on a CUDA machine, or use auto",
        )
    if setting == attention.NAME:
        attention.register()
    return setting


def use_liger(setting: str, cuda: bool, *, device: str | None = None) -> bool:
    """Whether to use Liger's kernels: ``on`` requires them, ``auto`` uses them on CUDA only
    when they import and one step through them matches PyTorch (a warning says why not when
    they are installed but fail). ``device``: where that check runs (default: cuda)."""
    from chunkwise.train.kernels import liger_problem

    if setting == "off":
        return False
    problem = "needs CUDA" if not cuda and device is None else liger_problem(device or "cuda")
    if problem is None:
        return True
    if setting == "on":
        raise MissingDependency(
            f"Liger kernels (model.liger=on: {problem})",
            "pip install liger-kernel on a CUDA machine, or set model.liger=auto",
        )
    if problem not in ("not installed", "needs CUDA"):
        log.warning("Liger kernels are installed but unusable (%s): not using them", problem)
    return False


# --------------------------------------------------------------------------------------------
# tokenizer


def _prompt_texts() -> Iterator[str]:
    root = resources.files("chunkwise.prompts")
    for strategy in ("standard", "mapreduce"):
        for entry in (root / strategy).iterdir():
            if entry.name.endswith((".yaml", ".txt")):
                yield entry.read_text(encoding="utf-8")


def _record_texts(rec: dict) -> Iterator[str]:
    for m in rec.get("messages") or []:
        if isinstance(m, dict) and isinstance(m.get("content"), str):
            yield m["content"]
    for key in ("document", "question", "answer"):
        if isinstance(rec.get(key), str):
            yield rec[key]
    inter = rec.get("intermediate") or {}
    if isinstance(inter, dict):
        groups = [inter.get("map") or [], *list(inter.get("collapse") or [])]
        for group in groups:
            for r in group if isinstance(group, list) else []:
                if isinstance(r, dict):
                    for key in ("extracted_information", "rationale", "answer", "chunk"):
                        if isinstance(r.get(key), str):
                            yield r[key]


#: ``model.name_or_path`` values naming the embedded offline model (Gemma-3-270M)
EMBEDDED_NAMES = ("default", "hf:default")


def local_model_path(name_or_path: str) -> str:
    """``default`` (or ``hf:default``) -> the embedded model's converted folder (converting it
    on first use, offline); anything else unchanged (a folder or a hub id)."""
    if name_or_path in EMBEDDED_NAMES:
        from chunkwise.llm.embedded import converted_dir

        return str(converted_dir())
    return name_or_path


def build_tokenizer(recipe: Recipe, files: Sequence[Path], *, is_main: bool = True) -> Any:
    """The recipe's tokenizer with its chat template resolved.

    ``model.tokenizer: train`` trains a BPE on the data (and the prompt templates) once and
    keeps it in ``<output_dir>/tokenizer`` so a resumed run uses the very same vocabulary.
    """
    m = recipe.model
    if m.tokenizer == "train":
        saved = Path(recipe.output_dir) / "tokenizer"
        if (saved / "tokenizer.json").exists():
            tok = load_tokenizer(str(saved))
        else:
            from chunkwise.train.formats import read_records

            texts = list(_prompt_texts())
            for _, rec in read_records(files, recipe.data.limit):
                texts.extend(_record_texts(rec))
            tok = train_bpe(texts, m.tokenizer_vocab_size)
            if is_main:
                saved.parent.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(prefix=".tokenizer.", dir=saved.parent))
                tok.save_pretrained(tmp)
                try:
                    tmp.rename(saved)
                except OSError:  # another process saved it first
                    shutil.rmtree(tmp, ignore_errors=True)
    else:
        tok = load_tokenizer(
            local_model_path(m.tokenizer or m.name_or_path), trust_remote_code=m.trust_remote_code
        )
    resolve_chat_template(tok, m.chat_template)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


def prompt_kind(recipe: Recipe, tokenizer: Any) -> str:
    """chat when the data says so or the tokenizer has a template (auto), else base."""
    setting = recipe.data.prompts
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if setting == "auto":
        return "chat" if has_template else "base"
    if setting == "chat" and not has_template:
        raise BadInput(
            "data.prompts=chat but the tokenizer has no chat template; set "
            "model.chat_template (llama3 or a .jinja file) or data.prompts=base"
        )
    return setting


# --------------------------------------------------------------------------------------------
# model


def build_model(recipe: Recipe, tokenizer: Any, *, cuda: bool, dtype: Any) -> Any:
    """The causal LM to train, gradient checkpointing set (LoRA comes after: :func:`apply_lora`)."""
    import torch
    from transformers import AutoModelForCausalLM

    m = recipe.model
    attn = attn_implementation(m.attn_implementation, cuda)
    if m.init == "random":
        cfg = arch_config(m.arch, m.arch_overrides, vocab_size=len(tokenizer))
        if cfg.vocab_size < len(tokenizer):
            raise BadInput(
                f"model.arch {m.arch!r} has a vocabulary of {cfg.vocab_size} but the "
                f"tokenizer has {len(tokenizer)} tokens"
            )
        cfg.pad_token_id = tokenizer.pad_token_id
        cfg.bos_token_id = tokenizer.bos_token_id
        cfg.eos_token_id = tokenizer.eos_token_id
        torch.manual_seed(recipe.train.seed)
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation=attn, dtype=dtype)
    else:
        try:
            model = AutoModelForCausalLM.from_pretrained(
                local_model_path(m.name_or_path),
                dtype=dtype,
                attn_implementation=attn,
                trust_remote_code=m.trust_remote_code,
            )
        except OSError as e:
            raise BadInput(
                f"cannot load model.name_or_path {m.name_or_path!r}: {str(e).splitlines()[0]}"
            ) from None
    rows = embedding_rows(model)
    if len(tokenizer) > rows:
        raise BadInput(
            f"the tokenizer has {len(tokenizer)} tokens but the model's embedding has {rows} rows"
        )
    ends = end_ids(tokenizer)
    model.generation_config.eos_token_id = ends if len(ends) > 1 else (ends[0] if ends else None)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.config.use_cache = False
    if use_liger(m.liger, cuda):
        _apply_liger(model)
    if m.gradient_checkpointing:
        enable_checkpointing(model, offload=m.activation_offload)
    return model


def embedding_rows(model: Any) -> int:
    """Rows of the input embedding, also for a ZeRO-3-partitioned weight (whose ``.shape`` is
    ``(0,)`` outside a gather): ``num_embeddings``, else DeepSpeed's ``ds_shape``."""
    emb = model.get_input_embeddings()
    rows = getattr(emb, "num_embeddings", None)
    if rows is None:
        w = emb.weight
        rows = (getattr(w, "ds_shape", None) or w.shape)[0]
    return int(rows)


def enable_checkpointing(model: Any, offload: bool = False) -> None:
    """Activation (gradient) checkpointing per decoder layer, non-reentrant; ``offload`` also
    moves the saved layer inputs to CPU memory (transformers >= 5 only)."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(
            activation_checkpointing_kwargs=kwargs, offload=offload
        )
    else:  # older transformers
        if offload:
            raise BadInput("model.activation_offload needs transformers >= 5")
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def _apply_liger(model: Any) -> None:
    """Liger's RMSNorm, RoPE and SwiGLU kernels on a Llama model (the loss uses Liger CE)."""
    if getattr(model.config, "model_type", "") != "llama":
        log.warning(
            "Liger kernels are wired for Llama only; %s keeps its own layers",
            model.config.model_type,
        )
        return
    from liger_kernel.transformers import apply_liger_kernel_to_llama

    apply_liger_kernel_to_llama(
        rope=True,
        rms_norm=True,
        swiglu=True,
        cross_entropy=False,
        fused_linear_cross_entropy=False,
        model=model,
    )


def token_indices(tokenizer: Any, tokens: list[str]) -> list[int]:
    """The vocabulary ids of ``tokens`` (each must be one token of ``tokenizer``)."""
    out = []
    for t in tokens:
        i = tokenizer.convert_tokens_to_ids(t)
        if i is None or i == tokenizer.unk_token_id:
            raise BadInput(f"model.lora.trainable_tokens: {t!r} is not a token of the tokenizer")
        out.append(int(i))
    return out


def apply_lora(model: Any, lora: Any, tokenizer: Any = None) -> Any:
    """Wrap ``model`` with peft LoRA adapters per ``model.lora``."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise MissingDependency("peft (model.lora.enabled)", "pip install peft") from None
    extra = {}
    if lora.trainable_tokens:
        if tokenizer is None:
            raise BadInput("model.lora.trainable_tokens needs the tokenizer")
        extra["trainable_token_indices"] = token_indices(tokenizer, list(lora.trainable_tokens))
    cfg = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.target_modules),
        task_type="CAUSAL_LM",
        **extra,
    )
    model = get_peft_model(model, cfg)
    model.enable_input_require_grads()  # checkpointed layers need an input that requires grad
    return model


def count_params(model: Any) -> tuple[int, int]:
    """(all parameters, trainable parameters)."""
    total = trainable = 0
    for p in model.parameters():
        n = p.numel() if not hasattr(p, "ds_numel") else p.ds_numel
        total += n
        trainable += n if p.requires_grad else 0
    return total, trainable


__all__ = [
    "ARCH_PRESETS",
    "apply_lora",
    "arch_config",
    "attn_implementation",
    "build_model",
    "build_tokenizer",
    "count_params",
    "prompt_kind",
    "token_indices",
    "use_liger",
]
