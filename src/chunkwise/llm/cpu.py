"""What this CPU computes natively, for choosing a dtype on machines without a GPU.

bf16 is fast only where the CPU has bf16 instructions (Intel AMX or AVX512-BF16); elsewhere
(e.g. an AVX2-only AMD EPYC) it is emulated. Measured on such a 2-core EPYC: vLLM's CPU
engine prefilled 37 tokens/s in bf16, and one bf16-autocast LoRA step took 521 s against 14 s
in fp32; on an AMX machine bf16 prefill was 2.3x faster than fp32 (HF backend).

:func:`choose_cpu_dtype` is the one choice for both ``hf:`` and ``vllm:`` on CPU when a spec gives
no ``dtype``; the environment variable :data:`CPU_DTYPE_ENV` (``float32`` or ``bfloat16``)
overrides it, e.g. to keep results comparable across CPU kinds (the test suite pins float32).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from chunkwise.errors import BadInput

#: /proc/cpuinfo flags that mean bf16 matrix math in hardware
BF16_FLAGS = frozenset({"amx_bf16", "avx512_bf16"})
#: environment variable that overrides the automatic CPU dtype (for hf: and vllm:)
CPU_DTYPE_ENV = "CHUNKWISE_CPU_DTYPE"
#: the values it takes
CPU_DTYPES = ("float32", "bfloat16")


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The instruction-set flags of the first CPU in ``/proc/cpuinfo`` (empty if unreadable)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


@lru_cache(maxsize=1)
def machine_flags() -> frozenset[str]:
    """This machine's CPU flags, read once."""
    return cpu_flags()


def native_bf16(flags: frozenset[str] | None = None) -> bool:
    """Whether this CPU (or one with ``flags``) does bf16 matrix math in hardware."""
    return bool((machine_flags() if flags is None else flags) & BF16_FLAGS)


def choose_cpu_dtype(
    flags: frozenset[str] | None = None, env: str | None = None
) -> tuple[str, str]:
    """``(dtype, why)`` for an engine on this CPU: the value of :data:`CPU_DTYPE_ENV` when set,
    else bfloat16 where the CPU has bf16 instructions (:data:`BF16_FLAGS`), else float32.

    ``flags`` and ``env`` default to this machine's ``/proc/cpuinfo`` and environment."""
    if env is None:
        env = os.environ.get(CPU_DTYPE_ENV, "")
    env = env.strip().lower()
    if env:
        if env not in CPU_DTYPES:
            raise BadInput(f"{CPU_DTYPE_ENV}={env!r}: expected one of {', '.join(CPU_DTYPES)}")
        return env, f"set by {CPU_DTYPE_ENV}"
    native = sorted((machine_flags() if flags is None else flags) & BF16_FLAGS)
    if native:
        return "bfloat16", f"the CPU has {'/'.join(native)} (bf16 in hardware)"
    return "float32", "the CPU has no amx_bf16/avx512_bf16 (bf16 would be emulated)"


def cpu_dtype() -> str:
    """The dtype an engine should run in on this CPU: see :func:`choose_cpu_dtype`."""
    return choose_cpu_dtype()[0]
