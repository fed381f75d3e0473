"""The Accelerator a run trains with, and the name of the engine it really uses.

``accelerate launch --config_file CFG`` tells the script what to use through environment
variables (``ACCELERATE_USE_DEEPSPEED``, ``ACCELERATE_DEEPSPEED_ZERO_STAGE``,
``ACCELERATE_USE_FSDP``, ``FSDP_VERSION``, ...). :func:`requested_engine` reads them,
:func:`build_accelerator` builds an Accelerator that runs exactly that engine on CUDA *and* on a
CPU-only machine (gloo), and :func:`engine_name` names the engine the Accelerator ended up with.
A run whose engine differs from the requested one stops (``BadInput``): never a silent
downgrade (``Accelerator(cpu=True)`` turns a DeepSpeed launch into plain DDP).

Engine names: ``deepspeed-zero2``, ``deepspeed-zero3``, ``deepspeed-zero3-offload`` (any
offload), ``fsdp2`` (``fsdp1`` for version 1), ``ddp`` (several processes) and ``single``.

On CPU: DeepSpeed runs through its CPU accelerator (``DS_ACCELERATOR=cpu``, set here when CUDA
is absent) with a gloo process group; accelerate only builds FSDP for GPU-like distributed types,
so on CPU the gloo group is created first and the state is marked multi-device before the
Accelerator reads it (FSDP2's ``fully_shard`` itself runs on CPU tensors with gloo).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from chunkwise.errors import BadInput, MissingDependency
from chunkwise.train.recipe import Recipe

ENGINES = (
    "deepspeed-zero1",
    "deepspeed-zero2",
    "deepspeed-zero3",
    "deepspeed-zero2-offload",
    "deepspeed-zero3-offload",
    "fsdp1",
    "fsdp2",
    "ddp",
    "single",
)


def _flag(name: str) -> bool:
    return os.environ.get(name, "false").strip().lower() in ("1", "true", "yes")


def _world() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE", "1") or 1)
    except ValueError:
        return 1


def requested_engine(env: dict[str, str] | None = None) -> str:
    """The engine ``accelerate launch`` asked for, from its environment variables."""
    saved = None
    if env is not None:
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
    try:
        if _flag("ACCELERATE_USE_DEEPSPEED"):
            stage = os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2").strip() or "2"
            offload = any(
                os.environ.get(k, "none").strip().lower() in ("cpu", "nvme")
                for k in (
                    "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE",
                    "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE",
                )
            )
            return f"deepspeed-zero{stage}" + ("-offload" if offload else "")
        if _flag("ACCELERATE_USE_FSDP"):
            return "fsdp2" if os.environ.get("FSDP_VERSION", "1").strip() == "2" else "fsdp1"
        return "ddp" if _world() > 1 else "single"
    finally:
        if saved is not None:
            os.environ.clear()
            os.environ.update(saved)


def launch_env(config_file: str | os.PathLike, num_processes: int) -> dict[str, str]:
    """The environment ``accelerate launch --config_file CONFIG --num_processes N`` gives the
    training script, built by accelerate's own config loader, launch parser, validator and env
    builders (no process is started). Bad configs raise ``BadInput``."""
    import contextlib
    import io

    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    if not Path(config_file).is_file():
        raise BadInput(f"--config_file {str(config_file)!r}: no such file")
    parser = launch_command_parser()
    argv = ["--config_file", str(config_file), "--num_processes", str(num_processes), "x.py"]
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            args = parser.parse_args(argv)
        args, defaults, mp_from_config = _validate_launch_command(args)
        if args.use_deepspeed:  # as accelerate's launch_command does before its launcher
            fields = list(defaults.deepspeed_config) if defaults else []
            fields += ["mixed_precision"] if mp_from_config else []
            args.deepspeed_fields_from_accelerate_config = ",".join(fields)
            _, env = prepare_deepspeed_cmd_env(args)
        else:
            env = prepare_multi_gpu_env(args)
    except (ValueError, TypeError, KeyError, SystemExit) as e:
        raise BadInput(f"--config_file {str(config_file)!r}: {e}") from None
    env["WORLD_SIZE"] = str(num_processes)
    return env


def engine_name(accelerator: Any) -> str:
    """The engine this Accelerator trains with (see the module docstring for the names)."""
    from accelerate.utils import DistributedType

    dt = accelerator.distributed_type
    if dt == DistributedType.DEEPSPEED:
        plugin = accelerator.state.deepspeed_plugin
        zero = plugin.deepspeed_config.get("zero_optimization") or {}
        stage = int(zero.get("stage", plugin.zero_stage))
        offload = any(
            str((zero.get(k) or {}).get("device", "none")).lower() in ("cpu", "nvme")
            for k in ("offload_optimizer", "offload_param")
        )
        return f"deepspeed-zero{stage}" + ("-offload" if offload else "")
    if dt == DistributedType.FSDP:
        return "fsdp2" if accelerator.state.fsdp_plugin.fsdp_version == 2 else "fsdp1"
    if accelerator.num_processes > 1:
        return "ddp"
    return "single"


def load_dtype(
    setting: str, *, cuda: bool, engine: str, lora: bool, precision: str = "fp32"
) -> str:
    """The dtype the model's weights are loaded in (``model.dtype``; ``auto`` decides).

    auto: on CUDA, bf16 under DeepSpeed (its bf16 mode keeps fp32 master weights itself) and for
    LoRA on any engine (the frozen base needs no fp32 copy: 16 GB instead of 32 GB for an 8B
    model on every DDP/FSDP GPU). On CPU, bf16 for LoRA under bf16 autocast (``precision``
    resolved to bf16): the matmuls read bf16 copies of the frozen weights either way, and
    casting them every step cost ~20% of a step (LoRA on the embedded Gemma-3-270M, 2
    AVX-512-BF16 cores, 2,048-token packs: ~11 s per step over an fp32 base, ~8.6 s over a
    bf16 one; the adapter's own weights stay fp32). fp32 otherwise: full fine-tuning under
    DDP/FSDP on CUDA (bf16 autocast over fp32 weights) and every fp32 run on CPU."""
    if setting != "auto":
        return setting
    if cuda and (engine.startswith("deepspeed") or lora):
        return "bfloat16"
    if lora and precision == "bf16":
        return "bfloat16"
    return "float32"


def sp_size(env: dict[str, str] | None = None) -> int:
    """The launch's Ulysses sequence-parallel degree (``parallelism_config_sp_size``; 1 = off)."""
    env = os.environ if env is None else env
    try:
        return int(env.get("PARALLELISM_CONFIG_SP_SIZE", "1") or 1)
    except ValueError:
        return 1


def sp_attention(env: dict[str, str] | None = None) -> str | None:
    """The attention the launch's Ulysses wrapper runs (``parallelism_config_sp_attn_
    implementation``), or None without sequence parallelism; the model must be built with it."""
    env = os.environ if env is None else env
    if sp_size(env) <= 1:
        return None
    return env.get("PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION", "") or ""


#: the launch flag that names the attention Ulysses runs
SP_ATTN_FLAG = "--parallelism_config_sp_attn_implementation"


def check_ulysses(
    env: dict[str, str] | None = None,
    *,
    cuda: bool,
    flash_attn: bool,
    model_attn: str = "auto",
    packed: bool = False,
) -> str | None:
    """Check a Ulysses launch (``parallelism_config_sp_size > 1``) against the recipe before any
    model loads; returns the attention implementation the model must use (None without SP).

    DeepSpeed's Ulysses wrapper runs the attention the launch names and refuses a model built
    with another one (a raw ValueError after the model loaded); ``model.attn_implementation:
    auto`` takes the launch's, any other value must equal it. A flash-attention kernel needs
    flash-attn on CUDA. With ``sdpa`` the wrapper drops the attention mask, so packed rows
    would attend across their sequences: packing needs flash attention there."""
    env = os.environ if env is None else env
    attn = sp_attention(env)
    if attn is None:
        return None
    sp = sp_size(env)
    if not attn:
        raise BadInput(
            f"Ulysses sequence parallelism (sp_size {sp}) needs the attention it runs: add "
            f"{SP_ATTN_FLAG} sdpa (or flash_attention_2 on CUDA) to the accelerate launch"
        )
    if attn.startswith("flash_attention") and not (cuda and flash_attn):
        raise MissingDependency(
            f"flash-attn (the accelerate config's Ulysses sequence parallelism, sp_size {sp}, "
            f"uses parallelism_config_sp_attn_implementation: {attn})",
            "pip install flash-attn on a CUDA machine, or set "
            "parallelism_config_sp_attn_implementation: sdpa with batching.strategy=sorted "
            "and batching.batch_size=1",
        )
    if model_attn not in ("auto", attn):
        raise BadInput(
            f"model.attn_implementation={model_attn} but the launch runs Ulysses attention "
            f"with {attn} ({SP_ATTN_FLAG} {attn}); the model must use the same: add "
            f"--model.attn_implementation={attn} (or leave it auto)"
        )
    if attn == "sdpa" and packed:
        raise BadInput(
            "batching.strategy=packed under Ulysses with sdpa attention would let packed "
            "sequences attend to each other (Ulysses drops the attention mask); add "
            "--batching.strategy=sorted --batching.batch_size=1, or launch with "
            f"{SP_ATTN_FLAG} flash_attention_2 on CUDA"
        )
    return attn


def _family(engine: str) -> str:
    return engine.split("-")[0] if engine.startswith("deepspeed") else engine


def build_accelerator(
    *, recipe: Recipe | None = None, timeout_minutes: float | None = None, **kwargs: Any
) -> tuple[Any, str]:
    """An Accelerator running the engine the launch asked for, and that engine's name.

    ``kwargs`` go to ``Accelerator`` (gradient accumulation, mixed precision, trackers).
    ``recipe``: checked against a Ulysses launch first (:func:`check_ulysses`); its
    ``train.timeout_minutes`` is the process group's timeout unless ``timeout_minutes`` is given.
    Raises ``BadInput`` when the engine that would run is not the one requested."""
    import torch

    from chunkwise.train.kernels import flash_attn_problem

    wanted = requested_engine()
    cuda = torch.cuda.is_available()
    check_ulysses(
        cuda=cuda,
        flash_attn=cuda and flash_attn_problem() is None,
        model_attn=recipe.model.attn_implementation if recipe else "auto",
        packed=recipe is not None and recipe.batching.strategy == "packed",
    )
    if timeout_minutes is None and recipe is not None:
        timeout_minutes = recipe.train.timeout_minutes
    if wanted.startswith("deepspeed"):
        if not cuda:
            os.environ.setdefault("DS_ACCELERATOR", "cpu")
        try:
            import deepspeed  # noqa: F401
        except ImportError:
            raise MissingDependency(
                f"DeepSpeed (the accelerate config asks for {wanted})",
                "pip install 'chunkwise[deepspeed]'",
            ) from None
        if not cuda:
            skip_cpu_inference_kernel()
    from accelerate import Accelerator

    if cuda:
        accelerator = Accelerator(kwargs_handlers=_pg_kwargs("nccl", timeout_minutes), **kwargs)
    elif wanted.startswith("deepspeed"):
        # cpu=True would drop DeepSpeed; without a backend accelerate counts one process
        accelerator = Accelerator(kwargs_handlers=_pg_kwargs("gloo", timeout_minutes), **kwargs)
    elif wanted.startswith("fsdp"):
        accelerator = _cpu_fsdp_accelerator(timeout_minutes, **kwargs)
    else:
        # without cpu=True, torchrun ranks on a CPU machine each run alone (no gloo group)
        accelerator = Accelerator(
            cpu=True, kwargs_handlers=_pg_kwargs("gloo", timeout_minutes), **kwargs
        )
    actual = engine_name(accelerator)
    if _family(actual) != _family(wanted) or (wanted.startswith("deepspeed") and actual != wanted):
        raise BadInput(
            f"the accelerate launch asked for {wanted} but this process would train with "
            f"{actual}; check the --config_file and that every process was started by it"
        )
    return accelerator, actual


#: DeepSpeed's name for its shared-memory all-reduce kernel on the CPU accelerator
CPU_INFERENCE_KERNEL = "deepspeed_shm_comm"


def fast_bf16() -> bool:
    """Whether bf16 autocast is faster than fp32 here: on CUDA, and on CPUs with native bf16
    arithmetic (AVX-512-BF16 or AMX; oneDNN's check). Elsewhere bf16 is emulated and slower.
    Measured with LoRA on the embedded Gemma-3-270M on 2 AVX-512-BF16 cores, one packed
    1,800-token row: ~18 s per step in fp32, ~11 s under bf16 autocast."""
    import torch

    if torch.cuda.is_available():
        return True
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def skip_cpu_inference_kernel() -> None:
    """Keep DeepSpeed's CPU comm backend from compiling its shared-memory all-reduce kernel.

    The backend builds it when it starts (a C++ JIT build: ~60 s on 2 cores at the first
    launch, a reload at every later one), but only ``inference_all_reduce`` calls it; the
    training collectives go through the gloo process group either way. Marked incompatible, the
    op is not built, and ``inference_all_reduce`` falls back to gloo too."""
    import deepspeed.ops

    deepspeed.ops.__compatible_ops__[CPU_INFERENCE_KERNEL] = False


def _pg_kwargs(backend: str, timeout_minutes: float | None) -> list[Any]:
    """accelerate's process-group settings: ``backend``, and the timeout when one is given
    (else accelerate's default: 10 minutes for NCCL, 30 for gloo); none for one process."""
    from datetime import timedelta

    from accelerate.utils import InitProcessGroupKwargs

    if int(os.environ.get("LOCAL_RANK", "-1") or -1) == -1 and _world() <= 1:
        return []
    timeout = timedelta(minutes=timeout_minutes) if timeout_minutes else None
    return [InitProcessGroupKwargs(backend=backend, timeout=timeout)]


def process_group_timeout() -> float | None:
    """The default process group's timeout in seconds (None without one, or unreadable)."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    try:
        group = dist.distributed_c10d._get_default_group()
        device = torch.device("cuda" if dist.get_backend() == "nccl" else "cpu")
        return group._get_backend(device).options._timeout.total_seconds()
    except (AttributeError, RuntimeError):
        return None


def _cpu_fsdp_accelerator(timeout_minutes: float | None = None, **kwargs: Any) -> Any:
    """FSDP on a CPU machine: accelerate enables FSDP only for GPU-like distributed types, so
    the gloo group is created first (``PartialState(cpu=True)``) and marked multi-device."""
    from datetime import timedelta

    from accelerate import Accelerator, PartialState
    from accelerate.utils import DistributedType

    extra = {"timeout": timedelta(minutes=timeout_minutes)} if timeout_minutes else {}
    state = PartialState(cpu=True, **extra)
    if state.num_processes < 2:
        raise BadInput("FSDP needs at least 2 processes (accelerate launch --num_processes N)")
    PartialState._shared_state["distributed_type"] = DistributedType.MULTI_GPU
    return Accelerator(**kwargs)


__all__ = [
    "ENGINES",
    "build_accelerator",
    "check_ulysses",
    "engine_name",
    "fast_bf16",
    "launch_env",
    "load_dtype",
    "process_group_timeout",
    "requested_engine",
    "sp_attention",
    "sp_size",
]
