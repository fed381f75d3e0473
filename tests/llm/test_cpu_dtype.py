"""The CPU dtype choice: bf16 only where the CPU has bf16 instructions."""

from __future__ import annotations

from chunkwise.llm import cpu

EPYC = "processor\t: 0\nvendor_id\t: AuthenticAMD\nflags\t\t: fpu sse2 avx avx2 fma\n"
SAPPHIRE = "processor\t: 0\nflags\t\t: avx2 avx512f avx512_bf16 amx_tile amx_bf16\n"


def test_flags_are_read_from_cpuinfo():
    assert "avx2" in cpu.cpu_flags(EPYC) and "avx512_bf16" not in cpu.cpu_flags(EPYC)
    assert cpu.cpu_flags("garbage without flags") == frozenset()


def test_bf16_only_with_bf16_instructions(monkeypatch):
    for text, want in ((EPYC, "float32"), (SAPPHIRE, "bfloat16")):
        monkeypatch.setattr(
            cpu, "native_bf16", lambda t=text: bool(cpu.cpu_flags(t) & cpu.BF16_FLAGS)
        )
        assert cpu.cpu_dtype() == want
