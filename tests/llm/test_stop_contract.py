"""One stop-string contract for every backend (see ``Completion`` in chunkwise.llm.base).

The same MapReduce map wave goes through ``scripted``, ``llamacpp`` and ``vllm`` (stand-in
modules that cut stop strings as those libraries do: llama-cpp-python without naming the stop,
vLLM naming it in ``stop_reason``) and ``openai:`` against a real HTTP server on loopback; all
must give the same ``stop_reason`` per map call, the same NO-INFORMATION filtering and the same
early stops. The real engines (hf, vllm, openai -> vllm serve) are compared in tests/vllm_engine.
"""

from __future__ import annotations

import re
import sys
import types

import pytest

from chunkwise.llm import GenerationParams, Request, load_llm
from chunkwise.llm import llamacpp as llamacpp_backend
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.serve import serve_in_thread
from chunkwise.strategies import Query, get_strategy
from chunkwise.strategies.mapreduce import NO_INFO_STOP

try:  # imported as part of a package when tests/llm has an __init__.py
    from .test_optional_backends import FakeLlama, FakeSamplingParams, FakeVLLMEngine
except ImportError:
    from test_optional_backends import FakeLlama, FakeSamplingParams, FakeVLLMEngine

NOINFO = (
    "Extracted Information: nothing here\nRationale: unrelated\nAnswer: [NO INFORMATION]\n"
    "Confidence Score: 0\nand more words that an early stop never generates"
)
FOUND = (
    "Extracted Information: the code is 4711\nRationale: stated\nAnswer: 4711\nConfidence Score: 5"
)
N_PARTS, NEEDLE_AT = 6, 3


def reply(prompt: str) -> str:
    """The one 'model' every backend here runs: a finding where the needle is, else none."""
    part = re.search(r"===== Part of the document =====\n(.*?)===== End of part", prompt, re.S)
    if part is None:
        return "Rationale: one part says so\nAnswer: 4711"  # reduce
    return FOUND if "4711" in part.group(1) else NOINFO


def document() -> str:
    paras = []
    for i in range(N_PARTS):
        body = " ".join(f"filler{i}w{j}" for j in range(60)) + "."
        paras.append(("The secret code is 4711. " if i == NEEDLE_AT else "") + body)
    return "\n\n".join(paras)


class ReplyingLlama(FakeLlama):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def create_completion(self, prompt: str, **kw):
        self.REPLY = reply(prompt)
        return super().create_completion(prompt, **kw)


class ReplyingEngine(FakeVLLMEngine):
    def generate(self, prompts, params, use_tqdm=True, lora_request=None):
        outs = []
        for prompt, sp in zip(prompts, params, strict=True):
            self.REPLY = reply(self.tokenizer.decode(prompt["prompt_token_ids"]))
            outs += super().generate([prompt], [sp], use_tqdm, lora_request)
        return outs


@pytest.fixture
def fake_libraries(monkeypatch, tmp_path):
    llama = types.ModuleType("llama_cpp")
    llama.Llama = lambda **kw: ReplyingLlama(**kw)
    vllm = types.ModuleType("vllm")
    vllm.LLM = lambda **kw: ReplyingEngine({**kw, "max_model_len": 4096})
    vllm.SamplingParams = FakeSamplingParams
    monkeypatch.setitem(sys.modules, "llama_cpp", llama)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(llamacpp_backend, "default_model_path", lambda: gguf)


def run(llm) -> tuple[list[tuple[str | None, bool]], dict, str]:
    ans = get_strategy("mapreduce", prompts="chat", chunk_tokens=80).answer(
        document(), Query("What is the secret code?"), llm
    )
    maps = [e for e in ans.trace if e.stage == "map"]
    per_map = [(e.output["answer"], e.output["no_information"]) for e in maps]
    keys = ("chunks", "map_no_information", "early_stops")
    return per_map, {k: ans.stats.extra[k] for k in keys}, ans.text


def scripted() -> ScriptedLLM:
    return ScriptedLLM(rules=[(r"(?s)^(.*)$", lambda m: reply(m.group(1)))], window=4096)


def test_every_backend_gives_the_same_map_outcomes(fake_libraries) -> None:
    outcomes = {
        "scripted": run(scripted()),
        "llamacpp": run(load_llm("llamacpp:default?ctx=4096")),
        "vllm": run(load_llm("vllm:m?max_model_len=4096")),
    }
    with (
        serve_in_thread(scripted()) as url,
        load_llm(f"openai:chunkwise@{url}?ctx=4096&tokenizer=scripted:echo") as remote,
    ):
        outcomes["openai"] = run(remote)
    reference = outcomes["scripted"]
    n = reference[1]["chunks"]
    assert n >= 3
    assert reference[1] == {"chunks": n, "map_no_information": n - 1, "early_stops": n - 1}
    assert reference[2] == "4711"
    for name, got in outcomes.items():
        assert got == reference, name


@pytest.mark.parametrize(
    "spec", ["scripted", "llamacpp:default?ctx=4096", "vllm:m?max_model_len=4096", "openai"]
)
def test_text_ends_before_the_stop_string_and_names_it(fake_libraries, spec) -> None:
    params = GenerationParams(max_new_tokens=60, stop=("\nConfidence", NO_INFO_STOP))
    prompt = "===== Part of the document =====\nnothing\n===== End of part"
    if spec == "openai":
        with serve_in_thread(scripted()) as url, load_llm(f"openai:chunkwise@{url}") as llm:
            out = llm.generate([Request(prompt, params)])[0]
    else:
        llm = scripted() if spec == "scripted" else load_llm(spec)
        out = llm.generate([Request(prompt, params)])[0]
    assert out.stop_reason == NO_INFO_STOP and out.finish_reason == "stop"
    assert out.text == NOINFO[: NOINFO.index(NO_INFO_STOP)]


@pytest.mark.slow
def test_the_real_hf_backend_keeps_the_contract(embedded_llm) -> None:
    params = GenerationParams(max_new_tokens=20, stop=(" 8", "zz"))
    out = embedded_llm.generate([Request("1, 2, 3, 4, 5,", params)])[0]
    assert out.stop_reason == " 8" and out.finish_reason == "stop"
    assert out.text.startswith(" 6, 7,") and " 8" not in out.text
