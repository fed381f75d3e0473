"""vLLM and llama-cpp-python backends.

Neither package is installed in the main environment: the missing-package errors are tested
for real, and the request/response plumbing is tested against small stand-in modules put in
``sys.modules`` that mimic the parts of each library's API the backends use. The real vLLM
engine (CPU) is tested in ``tests/vllm_engine`` from ``.venv-vllm`` (``make vllm``); the GPU test here
needs CUDA, vllm, and a local model folder in ``CHUNKWISE_VLLM_MODEL``.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import types
from dataclasses import dataclass, field
from typing import Any

import pytest

from chunkwise.errors import BadInput, MissingDependency
from chunkwise.llm import GenerationParams, Request, load_llm, parse_spec, vllm_backend
from chunkwise.llm import llamacpp as llamacpp_backend
from chunkwise.llm.cpu import cpu_dtype

# ------------------------------------------------------------------ missing packages


def test_vllm_missing_names_package_and_install_command(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(MissingDependency) as e:
        load_llm("vllm:meta-llama/Llama-3.1-8B-Instruct?tp=8")
    msg = str(e.value)
    assert msg.startswith("vllm is not available")
    assert "pip install 'chunkwise[vllm]'" in msg and "CUDA" in msg


def test_llamacpp_missing_names_package_and_install_command(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(MissingDependency) as e:
        load_llm("llamacpp:default")
    msg = str(e.value)
    assert msg.startswith("llama-cpp-python is not available")
    assert "pip install 'chunkwise[llamacpp]'" in msg and "15 minutes" in msg


@pytest.mark.parametrize(
    ("spec", "name"), [("vllm:m?tp=2&tpp=3", "tpp"), ("llamacpp:default?context=9", "context")]
)
def test_unknown_options_are_refused_before_importing(monkeypatch, spec: str, name: str) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(BadInput, match=rf"unknown option\(s\) {name}.*valid options: "):
        load_llm(spec)


# ------------------------------------------------------------------ a stand-in for vllm

_PIECE = re.compile(r" ?\w+| ?[^\w\s]| +|\n")
BOS = 0


class FakeTokenizer:
    """Word-piece tokenizer with the HF call signature and a chat template."""

    is_fast = True
    #: the template new tokenizers get (a test sets None to mimic a base model)
    default_template: str | None = "{{ messages }}"

    def __init__(self, chat_template: str | None = ""):
        self.chat_template = self.default_template if chat_template == "" else chat_template
        self.vocab: dict[str, int] = {"<bos>": BOS}
        self.inv = ["<bos>"]

    def _id(self, piece: str) -> int:
        if piece not in self.vocab:
            self.vocab[piece] = len(self.inv)
            self.inv.append(piece)
        return self.vocab[piece]

    def _one(self, text: str, add_special_tokens: bool, offsets: bool) -> dict[str, list]:
        ids, spans = [], []
        if add_special_tokens:
            ids.append(BOS)
            spans.append((0, 0))
        for m in _PIECE.finditer(text):
            ids.append(self._id(m.group()))
            spans.append(m.span())
        out: dict[str, list] = {"input_ids": ids}
        if offsets:
            out["offset_mapping"] = spans
        return out

    def __call__(self, text, add_special_tokens=True, return_offsets_mapping=False):
        if isinstance(text, list):
            return {
                "input_ids": [self._one(t, add_special_tokens, False)["input_ids"] for t in text]
            }
        return self._one(text, add_special_tokens, return_offsets_mapping)

    def decode(self, ids, skip_special_tokens=False):
        return "".join(self.inv[i] for i in ids if not (skip_special_tokens and i == BOS))

    def apply_chat_template(self, messages, tokenize=False, add_generation_prompt=False):
        text = "".join(f"<{m['role']}>{m['content']}\n" for m in messages)
        if add_generation_prompt:
            text += "<assistant>"
        if not tokenize:
            return text
        return {"input_ids": self._one(text, True, False)["input_ids"]}  # transformers 5 shape


@dataclass
class FakeSamplingParams:
    n: int = 1
    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    stop: list[str] | None = None
    seed: int | None = None
    logprobs: int | None = None


@dataclass
class Logprob:
    logprob: float
    decoded_token: str | None = None


@dataclass
class FakeCompletionOutput:
    text: str
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str
    stop_reason: str | int | None = None


@dataclass
class FakeRequestOutput:
    prompt_token_ids: list[int]
    outputs: list[FakeCompletionOutput]


@dataclass
class FakeVLLMEngine:
    """Answers every prompt with REPLY, honouring max_tokens, stop strings and logprobs."""

    kwargs: dict[str, Any]
    calls: list[tuple[list, list, dict]] = field(default_factory=list)
    tokenizer: FakeTokenizer = field(default_factory=FakeTokenizer)

    REPLY = "The answer is 42. Done."

    def __post_init__(self) -> None:
        model_config = types.SimpleNamespace(max_model_len=self.kwargs.get("max_model_len", 64))
        self.llm_engine = types.SimpleNamespace(model_config=model_config)

    def get_tokenizer(self) -> FakeTokenizer:
        return self.tokenizer

    def generate(self, prompts, params, use_tqdm=True, lora_request=None):
        self.calls.append((prompts, params, {"use_tqdm": use_tqdm, "lora_request": lora_request}))
        outs = []
        for prompt, sp in zip(prompts, params, strict=True):
            ids = self.tokenizer(self.REPLY, add_special_tokens=False)["input_ids"]
            finish = "stop"
            if len(ids) > sp.max_tokens:
                ids, finish = ids[: sp.max_tokens], "length"
            text = self.tokenizer.decode(ids)
            hit = None
            for s in sp.stop or []:  # as vLLM: cut before the stop string, and name it
                cut = text.find(s)
                if cut != -1:
                    text, finish, hit = text[:cut], "stop", s
            lps = None
            if sp.logprobs:
                lps = [{t: Logprob(-0.1 * (k + 1))} for k, t in enumerate(ids)]
            outs.append(
                FakeRequestOutput(
                    list(prompt["prompt_token_ids"]),
                    [FakeCompletionOutput(text, ids, lps, finish, hit)],
                )
            )
        return outs


@pytest.fixture
def fake_vllm(monkeypatch):
    """Install a stand-in ``vllm`` package; yields the list of engines it created."""
    engines: list[FakeVLLMEngine] = []

    def make_engine(**kwargs):
        engines.append(FakeVLLMEngine(kwargs))
        return engines[-1]

    mod = types.ModuleType("vllm")
    mod.LLM = make_engine
    mod.SamplingParams = FakeSamplingParams
    lora_pkg = types.ModuleType("vllm.lora")
    lora_req = types.ModuleType("vllm.lora.request")
    lora_req.LoRARequest = lambda name, int_id, path: ("lora", name, int_id, path)
    monkeypatch.setitem(sys.modules, "vllm", mod)
    monkeypatch.setitem(sys.modules, "vllm.lora", lora_pkg)
    monkeypatch.setitem(sys.modules, "vllm.lora.request", lora_req)
    return engines


def test_vllm_engine_options(fake_vllm, monkeypatch) -> None:
    monkeypatch.setattr(vllm_backend, "_on_cuda", lambda: True)
    llm = load_llm("vllm:org/model?tp=4&ctx=128&gpu_mem=0.8&seed=3&eager=1")
    kw = fake_vllm[0].kwargs
    assert kw == {
        "model": "org/model",
        "tensor_parallel_size": 4,
        "gpu_memory_utilization": 0.8,
        "trust_remote_code": False,  # never unless asked
        "dtype": "auto",
        "max_model_len": 128,
        "seed": 3,
        "enforce_eager": True,
    }
    assert (
        llm.context_window == 128
        and llm.spec == "vllm:org/model?tp=4&ctx=128&gpu_mem=0.8&seed=3&eager=1"
    )
    load_llm("vllm:org/model?trust_remote_code=1")
    assert fake_vllm[1].kwargs["trust_remote_code"] is True
    assert "max_model_len" not in fake_vllm[1].kwargs
    assert load_llm("vllm:org/model").context_window == 64  # read from the engine


def test_vllm_prefix_cache_switch_reaches_the_engine(fake_vllm) -> None:
    load_llm("vllm:org/model?prefix_cache=0")
    load_llm("vllm:org/model?prefix_cache=on")
    assert fake_vllm[0].kwargs["enable_prefix_caching"] is False
    assert fake_vllm[1].kwargs["enable_prefix_caching"] is True


def test_vllm_cpu_defaults_and_the_embedded_model(fake_vllm, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(vllm_backend, "_on_cuda", lambda: False)
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    from chunkwise.llm import embedded

    monkeypatch.setattr(embedded, "converted_dir", lambda: tmp_path / "gemma")
    llm = load_llm("vllm:default")
    kw = fake_vllm[0].kwargs
    assert kw["model"] == str(tmp_path / "gemma") and kw["dtype"] == cpu_dtype()
    assert kw["max_model_len"] == vllm_backend.CPU_MAX_MODEL_LEN and kw["enforce_eager"] is True
    assert "gpu_memory_utilization" not in kw and llm.chat is False  # a base model
    assert os.environ["VLLM_CPU_KVCACHE_SPACE"] == vllm_backend.CPU_KVCACHE_GB
    load_llm("vllm:default?max_model_len=2048&dtype=float32&eager=0")
    kw = fake_vllm[1].kwargs
    assert kw["max_model_len"] == 2048 and kw["dtype"] == "float32" and "enforce_eager" not in kw


def test_vllm_training_folder_with_an_adapter_runs_over_its_base(fake_vllm, tmp_path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "adapter_config.json").write_text(json.dumps({"r": 4, "base_model_name_or_path": "x"}))
    (run / "chunkwise_model.json").write_text(json.dumps({"base": "hf:org/base?ctx=512"}))
    llm = load_llm(f"vllm:{run}")
    kw = fake_vllm[0].kwargs
    assert kw["model"] == "org/base" and kw["max_model_len"] == 512
    assert kw["enable_lora"] is True and kw["max_lora_rank"] == 8  # the smallest slot >= 4
    assert llm.lora_request == ("lora", "adapter", 1, str(run))
    (run / "chunkwise_model.json").unlink()
    load_llm(f"vllm:{run}")
    assert fake_vllm[1].kwargs["model"] == "x"


def test_vllm_reports_the_stop_string(fake_vllm) -> None:
    llm = load_llm("vllm:m?ctx=64")
    out = llm.generate([Request("q", GenerationParams(max_new_tokens=20, stop=(" 42", "zz")))])[0]
    assert out.text == "The answer is" and out.stop_reason == " 42"
    assert out.finish_reason == "stop"
    out = llm.generate([Request("q", GenerationParams(max_new_tokens=20))])[0]
    assert out.stop_reason is None and out.text == FakeVLLMEngine.REPLY


@pytest.mark.parametrize(
    "bad",
    ["gpu_mem=1.5", "gpu_mem=lots", "tp=0", "tp=two", "reserved_cpus=-1", "reserved_cpus=999"],
)
def test_vllm_bad_option_values(fake_vllm, bad: str) -> None:
    with pytest.raises(BadInput, match=bad.split("=")[0]):
        load_llm(f"vllm:m?{bad}")


def test_vllm_reserved_cpus_reach_the_engine_start_and_only_it(fake_vllm, monkeypatch) -> None:
    """vLLM's CPU workers read VLLM_CPU_NUM_OF_RESERVED_CPU as they start: the option sets it
    while the engine is built and puts the caller's value back after."""
    monkeypatch.setattr(vllm_backend, "_on_cuda", lambda: False)
    seen = []
    real = sys.modules["vllm"].LLM

    def spy(**kwargs):
        seen.append(os.environ.get("VLLM_CPU_NUM_OF_RESERVED_CPU"))
        return real(**kwargs)

    monkeypatch.setattr(sys.modules["vllm"], "LLM", spy)
    monkeypatch.setenv("VLLM_CPU_NUM_OF_RESERVED_CPU", "1")
    load_llm("vllm:org/model?reserved_cpus=0")
    load_llm("vllm:org/model")
    assert seen == ["0", "1"] and os.environ["VLLM_CPU_NUM_OF_RESERVED_CPU"] == "1"
    monkeypatch.delenv("VLLM_CPU_NUM_OF_RESERVED_CPU")
    load_llm("vllm:org/model?reserved_cpus=0")
    assert seen[-1] == "0" and "VLLM_CPU_NUM_OF_RESERVED_CPU" not in os.environ
    # the default: no core reserved on a small CPU, vLLM's own choice on a big one or a GPU
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    load_llm("vllm:org/model")
    assert seen[-1] == "0" and "VLLM_CPU_NUM_OF_RESERVED_CPU" not in os.environ
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    load_llm("vllm:org/model")
    assert seen[-1] is None
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(vllm_backend, "_on_cuda", lambda: True)
    load_llm("vllm:org/model")
    assert seen[-1] is None


def test_vllm_generates_the_whole_batch_in_one_call(fake_vllm) -> None:
    llm = load_llm("vllm:m?ctx=64")
    reqs = [
        Request("Question one?", GenerationParams(max_new_tokens=50)),
        Request("Two", GenerationParams(max_new_tokens=3)),
        Request(
            "Three",
            GenerationParams(max_new_tokens=50, stop=(".",), temperature=0.7, top_p=0.9, seed=5),
        ),
    ]
    outs = llm.generate(reqs)
    engine = fake_vllm[0]
    assert len(engine.calls) == 1
    prompts, params, extra = engine.calls[0]
    assert extra["use_tqdm"] is False
    tok = engine.tokenizer
    assert prompts[0] == {"prompt_token_ids": tok("Question one?")["input_ids"]}
    assert prompts[0]["prompt_token_ids"][0] == BOS  # special tokens as vLLM would add them
    assert [p.max_tokens for p in params] == [50, 3, 50]
    assert params[0].temperature == 0 and params[0].top_p == 1.0 and params[0].stop is None
    assert (params[2].temperature, params[2].top_p, params[2].stop, params[2].seed) == (
        0.7,
        0.9,
        ["."],
        5,
    )
    assert all(p.logprobs is None for p in params)

    assert outs[0].text == FakeVLLMEngine.REPLY and outs[0].finish_reason == "stop"
    assert outs[0].prompt_tokens == len(prompts[0]["prompt_token_ids"])
    assert outs[0].completion_tokens == len(
        tok(FakeVLLMEngine.REPLY, add_special_tokens=False)["input_ids"]
    )
    assert outs[1].finish_reason == "length" and outs[1].completion_tokens == 3
    assert outs[1].text == "The answer is"
    assert outs[2].text == "The answer is 42" and outs[2].finish_reason == "stop"
    assert outs[0].latency_s == outs[1].latency_s == outs[2].latency_s >= 0  # batch wall time
    assert outs[0].token_logprobs is None and outs[0].tokens is None


def test_vllm_logprobs_and_token_strings(fake_vllm) -> None:
    llm = load_llm("vllm:m")
    out = llm.generate([Request("Q", GenerationParams(max_new_tokens=4, logprobs=True))])[0]
    assert fake_vllm[0].calls[0][1][0].logprobs == 1
    assert out.token_logprobs == pytest.approx([-0.1, -0.2, -0.3, -0.4])
    assert "".join(out.tokens) == out.text == "The answer is 42"
    assert out.tokens == ["The", " answer", " is", " 42"]
    # mean probability over " 42" only
    assert out.mean_token_prob(out.text.index("42")) == pytest.approx(math.exp(-0.4))


def test_vllm_chat_uses_the_template(fake_vllm) -> None:
    llm = load_llm("vllm:m")
    assert llm.chat is True
    msgs = [{"role": "user", "content": "Hi there"}]
    llm.generate([Request(msgs)])
    sent = fake_vllm[0].calls[0][0][0]["prompt_token_ids"]
    tok = fake_vllm[0].tokenizer
    assert tok.decode(sent, skip_special_tokens=True) == "<user>Hi there\n<assistant>"
    assert llm.prompt_tokens(msgs) == len(sent)


def test_vllm_without_template_sends_plain_text(fake_vllm, monkeypatch) -> None:
    monkeypatch.setattr(FakeTokenizer, "default_template", None)
    llm = load_llm("vllm:m")
    assert llm.chat is False  # detected: no template means a base model
    msgs = [{"role": "system", "content": "Read."}, {"role": "user", "content": "Q?"}]
    llm.generate([Request(msgs)])
    sent = fake_vllm[0].calls[0][0][0]["prompt_token_ids"]
    assert llm.tokenizer.decode(sent, skip_special_tokens=True) == "Read.\n\nQ?"
    with pytest.raises(BadInput, match="no chat template"):
        load_llm("vllm:m?chat=1")
    monkeypatch.setattr(FakeTokenizer, "default_template", "{{ x }}")
    assert load_llm("vllm:m?chat=0").chat is False  # a template but told to use plain text


def test_vllm_too_long_prompt_is_an_error_completion_and_max_tokens_is_clamped(fake_vllm) -> None:
    llm = load_llm("vllm:m?ctx=12")
    long_prompt = "word " * 20
    short = "a b c d e"  # BOS + 5 pieces (+ spaces attached) = 6 tokens
    outs = llm.generate(
        [Request(long_prompt), Request(short, GenerationParams(max_new_tokens=100))]
    )
    assert outs[0].finish_reason == "error" and outs[0].text == ""
    assert outs[0].prompt_tokens > 12
    prompts, params, _ = fake_vllm[0].calls[0]
    assert len(prompts) == 1  # the long one was never sent
    assert params[0].max_tokens == 12 - len(prompts[0]["prompt_token_ids"])
    assert outs[1].finish_reason == "length"


def test_vllm_tokens_helpers(fake_vllm) -> None:
    llm = load_llm("vllm:m")
    text = "Hello, wide world"
    assert llm.count_tokens(text) == 4  # no BOS counted
    offsets = llm.token_offsets(text)
    assert [text[s:e] for s, e in offsets] == ["Hello", ",", " wide", " world"]
    assert llm.count_tokens_batch([text, "a"]) == [llm.count_tokens(text), 1]
    assert llm.decode(llm.encode(text)) == text
    assert BOS not in llm.encode(text)


def test_vllm_adapter_becomes_a_lora_request(fake_vllm) -> None:
    llm = load_llm("vllm:base+adapter=/ckpt/lora?lora_rank=16")
    kw = fake_vllm[0].kwargs
    assert kw["enable_lora"] is True and kw["max_lora_rank"] == 16 and kw["model"] == "base"
    llm.generate([Request("x")])
    assert fake_vllm[0].calls[0][2]["lora_request"] == ("lora", "adapter", 1, "/ckpt/lora")


# ------------------------------------------------------------------ a stand-in for llama_cpp


class FakeLlama:
    """Byte-level 'tokenizer' (one token per word piece) and a canned completion."""

    REPLY = "Paris. And more"

    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.calls: list[tuple[str, dict]] = []
        self.tok = FakeTokenizer()

    def n_ctx(self) -> int:
        return self.kwargs["n_ctx"]

    def tokenize(self, data: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return self.tok(data.decode("utf-8"), add_special_tokens=add_bos)["input_ids"]

    def detokenize(self, ids: list[int]) -> bytes:
        return self.tok.decode(ids, skip_special_tokens=True).encode("utf-8")

    def create_completion(self, prompt: str, **kw):
        """As llama-cpp-python: cuts at ``stop`` strings without saying which; with
        ``stream=True`` yields one chunk per token, the last one with the finish reason."""
        self.calls.append((prompt, kw))
        if kw.get("logprobs") and not self.kwargs.get("logits_all"):
            raise ValueError("logprobs is not supported for models created with logits_all=False")
        text, finish = self.REPLY, "stop"
        for s in kw.get("stop") or []:
            if s in text:
                text = text[: text.index(s)]
        toks = [self.tok.inv[i] for i in self.tok(text, add_special_tokens=False)["input_ids"]]
        if len(toks) > kw["max_tokens"]:
            toks, finish = toks[: kw["max_tokens"]], "length"
            text = "".join(toks)
        if kw.get("stream"):
            return self._stream(toks, finish, bool(kw.get("logprobs")))
        lp = None
        if kw.get("logprobs"):
            lp = {"tokens": toks, "token_logprobs": [-1.0] * len(toks), "top_logprobs": None}
        return {
            "choices": [{"text": text, "finish_reason": finish, "logprobs": lp}],
            "usage": {
                "prompt_tokens": len(self.tokenize(prompt.encode())),
                "completion_tokens": len(toks),
            },
        }

    def _stream(self, toks: list[str], finish: str, logprobs: bool):
        self.streamed = 0  # how many tokens were pulled (a closed stream stops generating)
        for k, tok in enumerate(toks):
            self.streamed += 1
            lp = {"tokens": [tok], "token_logprobs": [-1.0]} if logprobs else None
            last = k == len(toks) - 1
            yield {
                "choices": [
                    {"text": tok, "finish_reason": finish if last else None, "logprobs": lp}
                ]
            }


@pytest.fixture
def fake_llama_cpp(monkeypatch, tmp_path):
    models: list[FakeLlama] = []

    def make(**kwargs):
        models.append(FakeLlama(**kwargs))
        return models[-1]

    mod = types.ModuleType("llama_cpp")
    mod.Llama = make
    monkeypatch.setitem(sys.modules, "llama_cpp", mod)
    gguf = tmp_path / "embedded.gguf"
    gguf.write_bytes(b"GGUF")
    # never assemble the real 250 MB file in unit tests
    monkeypatch.setattr(llamacpp_backend, "default_model_path", lambda: gguf)
    return models


def test_llamacpp_default_and_options(fake_llama_cpp, tmp_path) -> None:
    llm = load_llm("llamacpp:default?threads=2")
    kw = fake_llama_cpp[0].kwargs
    assert kw["model_path"] == str(tmp_path / "embedded.gguf")
    assert kw["n_ctx"] == llamacpp_backend.DEFAULT_CTX and kw["n_threads"] == 2
    assert kw["logits_all"] is False and kw["n_gpu_layers"] == 0
    assert llm.context_window == llamacpp_backend.DEFAULT_CTX and llm.chat is False
    other = tmp_path / "m.gguf"
    other.write_bytes(b"GGUF")
    load_llm(f"llamacpp:{other}?ctx=1024&logprobs=1")
    assert fake_llama_cpp[1].kwargs["n_ctx"] == 1024 and fake_llama_cpp[1].kwargs["logits_all"]
    with pytest.raises(BadInput, match="not found"):
        load_llm(f"llamacpp:{tmp_path / 'missing.gguf'}")
    with pytest.raises(BadInput, match="adapter"):
        load_llm(f"llamacpp:{other}+adapter=/x")


def test_llamacpp_completion_plumbing(fake_llama_cpp) -> None:
    llm = load_llm("llamacpp:default?ctx=64")
    outs = llm.generate(
        [
            Request("The capital of France is", GenerationParams(max_new_tokens=20, stop=(".",))),
            Request(
                "Again", GenerationParams(max_new_tokens=1, temperature=0.5, top_p=0.5, seed=9)
            ),
        ]
    )
    (p0, kw0), (_, kw1) = fake_llama_cpp[0].calls
    assert p0 == "The capital of France is"
    assert kw0 == {"max_tokens": 20, "temperature": 0.0, "top_p": 1.0, "stream": True}
    assert kw1["seed"] == 9 and kw1["top_p"] == 0.5 and "stop" not in kw1
    assert outs[0].text == "Paris" and outs[0].finish_reason == "stop"
    assert outs[0].stop_reason == "."
    assert outs[0].prompt_tokens == 1 + llm.count_tokens("The capital of France is")
    assert outs[1].finish_reason == "length" and outs[1].completion_tokens == 1
    assert outs[0].token_logprobs is None


def test_llamacpp_names_the_stop_string_and_stops_generating(fake_llama_cpp) -> None:
    llm = load_llm("llamacpp:default?logprobs=1")
    params = GenerationParams(max_new_tokens=20, stop=("zz", ". And"), logprobs=True)
    out = llm.generate([Request("Capital?", params)])[0]
    assert out.text == "Paris" and out.stop_reason == ". And" and out.finish_reason == "stop"
    assert fake_llama_cpp[0].streamed == 3  # 'Paris' '.' ' And': nothing pulled after the hit
    assert out.tokens == ["Paris"] and out.token_logprobs == [-1.0]
    out = llm.generate([Request("Capital?", GenerationParams(max_new_tokens=20))])[0]
    assert out.text == FakeLlama.REPLY and out.stop_reason is None
    assert out.finish_reason == "stop" and out.completion_tokens == 4


def test_llamacpp_logprobs_need_the_option(fake_llama_cpp) -> None:
    llm = load_llm("llamacpp:default")
    with pytest.raises(BadInput, match=r"\?logprobs=1"):
        llm.generate([Request("x", GenerationParams(logprobs=True))])
    llm = load_llm("llamacpp:default?logprobs=1")
    out = llm.generate([Request("x", GenerationParams(logprobs=True))])[0]
    assert fake_llama_cpp[1].calls[0][1]["logprobs"] == 1
    assert out.token_logprobs == [-1.0, -1.0, -1.0, -1.0] and "".join(out.tokens) == out.text


def test_llamacpp_base_model_gets_plain_prompt_and_long_prompts_error(fake_llama_cpp) -> None:
    llm = load_llm("llamacpp:default?ctx=16")
    llm.generate([Request([{"role": "user", "content": "Hi"}, {"role": "user", "content": "Yo"}])])
    assert fake_llama_cpp[0].calls[0][0] == "Hi\n\nYo"
    out = llm.generate([Request("w " * 30)])[0]
    assert out.finish_reason == "error" and len(fake_llama_cpp[0].calls) == 1
    llm.generate([Request("a b c", GenerationParams(max_new_tokens=100))])
    assert fake_llama_cpp[0].calls[1][1]["max_tokens"] == 16 - 4  # clamped to the window


def test_llamacpp_token_offsets(fake_llama_cpp) -> None:
    llm = load_llm("llamacpp:default")
    text = "Grüße, 世界 ok"
    offsets = llm.token_offsets(text)
    assert len(offsets) == llm.count_tokens(text)
    assert "".join(text[s:e] for s, e in offsets) == text


def test_align_pieces_handles_dropped_spaces_and_split_characters() -> None:
    text = "ab 日x"
    # a leading space dropped by the detokenizer, and 日 split into byte-fallback tokens
    pieces = [b"ab", " 日".encode()[:2], " 日".encode()[2:], b"x"]
    spans = llamacpp_backend.align_pieces(text, pieces)
    assert spans[0] == (0, 2)
    assert spans[1][0] == 2 and spans[2][1] == 4  # the split character is covered
    assert spans[3] == (4, 5)
    assert llamacpp_backend.align_pieces("Hi you", [b"Hi", b"you"]) == [(0, 2), (3, 6)]


# ------------------------------------------------------------------ the real engine


@pytest.mark.gpu
@pytest.mark.slow
def test_real_vllm_on_gpu() -> None:
    pytest.importorskip("vllm")
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    model = os.environ.get("CHUNKWISE_VLLM_MODEL")
    if not model:
        pytest.skip("set CHUNKWISE_VLLM_MODEL to a local model folder")
    with load_llm(f"vllm:{model}?ctx=2048&gpu_mem=0.5") as llm:
        outs = llm.generate(
            [
                Request(
                    "The capital of France is", GenerationParams(max_new_tokens=8, logprobs=True)
                ),
                Request("1, 2, 3,", GenerationParams(max_new_tokens=4)),
            ]
        )
        assert all(o.completion_tokens > 0 and o.prompt_tokens > 0 for o in outs)
        assert outs[0].token_logprobs and len(outs[0].token_logprobs) == outs[0].completion_tokens
        assert llm.count_tokens("hello world") > 0
        text = "Long documents, short models."
        assert "".join(text[s:e] for s, e in llm.token_offsets(text)).strip() == text


def test_spec_routes_to_these_modules() -> None:
    assert parse_spec("vllm:x?tp=8").options == {"tp": "8"}
    assert vllm_backend.load.__module__ == "chunkwise.llm.vllm_backend"
    assert llamacpp_backend.load.__module__ == "chunkwise.llm.llamacpp"
