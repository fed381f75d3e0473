"""The CPU dtype choice: bf16 only where the CPU has bf16 instructions, CHUNKWISE_CPU_DTYPE over it.

The suite pins ``CHUNKWISE_CPU_DTYPE=float32`` (tests/conftest.py): its answers were set in fp32
and CI runs on CPUs with and without bf16. The slow test here takes the pin away and checks the
automatic choice on this machine's CPU, with real answers from the embedded model.
"""

from __future__ import annotations

import logging

import pytest
import test_optional_backends  # (tests/llm, this folder, is on sys.path under pytest)

from chunkwise.errors import BadInput
from chunkwise.llm import cpu

fake_vllm = test_optional_backends.fake_vllm  # the stand-in vllm package (a fixture)

EPYC = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma\n"
GENOA = "processor\t: 0\nflags\t\t: avx2 avx512f avx512_bf16\n"
SAPPHIRE = "processor\t: 0\nflags\t\t: avx2 avx512f avx512_bf16 amx_tile amx_bf16\n"
AMX_ONLY = "processor\t: 0\nflags\t\t: avx2 amx_tile amx_bf16\n"

#: (this machine's cpuinfo, CHUNKWISE_CPU_DTYPE or None, the dtype an engine gets)
CHOICES = [
    (EPYC, None, "float32"),
    (SAPPHIRE, None, "bfloat16"),
    (GENOA, None, "bfloat16"),
    (SAPPHIRE, "float32", "float32"),
    (EPYC, "bfloat16", "bfloat16"),
]
CHOICE_IDS = ["avx2", "amx", "avx512bf16", "amx-env-fp32", "avx2-env-bf16"]


def _machine(monkeypatch, cpuinfo: str, env: str | None) -> None:
    """Pretend to run on a CPU with ``cpuinfo``'s flags, with ``env`` as the variable."""
    monkeypatch.setattr(cpu, "machine_flags", lambda: cpu.cpu_flags(cpuinfo))
    if env is None:
        monkeypatch.delenv(cpu.CPU_DTYPE_ENV, raising=False)
    else:
        monkeypatch.setenv(cpu.CPU_DTYPE_ENV, env)


def test_flags_are_read_from_cpuinfo():
    assert "avx2" in cpu.cpu_flags(EPYC) and "avx512_bf16" not in cpu.cpu_flags(EPYC)
    assert cpu.cpu_flags("garbage without flags") == frozenset()


@pytest.mark.parametrize(
    ("text", "want"),
    [(EPYC, "float32"), (GENOA, "bfloat16"), (SAPPHIRE, "bfloat16"), (AMX_ONLY, "bfloat16")],
)
def test_bf16_only_with_bf16_instructions(text, want):
    dtype, why = cpu.choose_cpu_dtype(cpu.cpu_flags(text), env="")
    assert dtype == want
    assert ("bf16 in hardware" in why) == (want == "bfloat16"), why


@pytest.mark.parametrize("flags", [EPYC, SAPPHIRE])
def test_environment_variable_overrides_the_flags(flags, monkeypatch):
    for value in ("float32", "bfloat16", " BFloat16 "):
        dtype, why = cpu.choose_cpu_dtype(cpu.cpu_flags(flags), env=value)
        assert dtype == value.strip().lower() and cpu.CPU_DTYPE_ENV in why
    # read from the environment when not given
    monkeypatch.setenv(cpu.CPU_DTYPE_ENV, "bfloat16")
    assert cpu.choose_cpu_dtype(cpu.cpu_flags(EPYC)) == ("bfloat16", "set by CHUNKWISE_CPU_DTYPE")
    assert cpu.cpu_dtype() == "bfloat16"
    monkeypatch.setenv(cpu.CPU_DTYPE_ENV, "float32")
    assert cpu.choose_cpu_dtype(cpu.cpu_flags(SAPPHIRE))[0] == "float32"
    monkeypatch.delenv(cpu.CPU_DTYPE_ENV)
    assert cpu.choose_cpu_dtype(cpu.cpu_flags(SAPPHIRE))[0] == "bfloat16"


def test_bad_environment_value_is_one_clear_error():
    with pytest.raises(BadInput, match=r"CHUNKWISE_CPU_DTYPE='fp16': expected one of float32"):
        cpu.choose_cpu_dtype(frozenset(), env="fp16")


def test_the_suite_runs_in_float32():
    """tests/conftest.py pins fp32 for the whole session (subprocesses inherit it)."""
    import os

    assert os.environ.get(cpu.CPU_DTYPE_ENV) == "float32"
    assert cpu.cpu_dtype() == "float32"


@pytest.mark.parametrize(("flags", "env", "want"), CHOICES, ids=CHOICE_IDS)
def test_hf_loads_in_the_chosen_dtype(tiny_llama, monkeypatch, caplog, flags, env, want):
    import torch

    from chunkwise.llm import load_llm

    _machine(monkeypatch, flags, env)
    with caplog.at_level(logging.INFO, logger="chunkwise.llm.hf"):
        llm = load_llm(f"hf:{tiny_llama}?device=cpu")
    said = [r.getMessage() for r in caplog.records if "on cpu in" in r.getMessage()]
    assert llm.model.dtype == getattr(torch, want)
    assert len(said) == 1 and f"on cpu in {want}: " in said[0], said
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="chunkwise.llm.hf"):
        llm = load_llm(f"hf:{tiny_llama}?device=cpu&dtype=float16")  # the spec's own wins
    assert llm.model.dtype == torch.float16
    assert not [r for r in caplog.records if "on cpu in" in r.getMessage()]


@pytest.mark.parametrize(("flags", "env", "want"), CHOICES, ids=CHOICE_IDS)
def test_vllm_cpu_default_follows_the_same_choice(fake_vllm, monkeypatch, flags, env, want):
    from chunkwise.llm import load_llm, vllm_backend

    monkeypatch.setattr(vllm_backend, "_on_cuda", lambda: False)
    _machine(monkeypatch, flags, env)
    load_llm("vllm:org/model")
    load_llm("vllm:org/model?dtype=float16")
    assert [e.kwargs["dtype"] for e in fake_vllm] == [want, "float16"]


@pytest.mark.slow
def test_the_shared_embedded_model_runs_in_float32(embedded_llm):
    """The session's hf:default (tests/conftest.py) answers as the suite's tests expect: fp32."""
    import torch

    assert embedded_llm.model.dtype == torch.float32


def _this_cpu_wants_bf16() -> bool:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        text = f.read()
    flags = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            break
    return bool(flags & {"amx_bf16", "avx512_bf16"})


@pytest.mark.slow
def test_automatic_dtype_on_this_cpu_answers_passkeys(monkeypatch, caplog):
    """hf:default with no pin: the dtype follows /proc/cpuinfo, is logged once with why, and the
    answers to three ~600-token passkey documents stay right in it."""
    import torch

    from chunkwise.benchmarks.infinitebench.metrics import score_one
    from chunkwise.data.synthetic import generate, passkey_query
    from chunkwise.llm import load_llm
    from chunkwise.strategies import get_strategy

    monkeypatch.delenv(cpu.CPU_DTYPE_ENV)
    with caplog.at_level(logging.INFO, logger="chunkwise.llm.hf"):
        llm = load_llm("hf:default")
    try:
        want = torch.bfloat16 if _this_cpu_wants_bf16() else torch.float32
        assert llm.model.dtype == want
        said = [r.getMessage() for r in caplog.records if "on cpu in" in r.getMessage()]
        assert len(said) == 1 and str(want).removeprefix("torch.") in said[0], said
        # the first 3 of bench/cpu_dtype.py's 6 documents: fp32 and bf16 both answer them
        # (its 6th, the needle at the end, neither does: a limit of the model, not the dtype)
        docs = generate("passkey", length_tokens=600, n=6, seed=11, count_tokens=llm.count_tokens)
        for rec in docs[:3]:
            ans = get_strategy("standard").answer(rec["context"], passkey_query(rec), llm)
            assert score_one("passkey", ans.text, rec["answer"]) == 1.0, (rec["answer"], ans.text)
    finally:
        llm.close()
