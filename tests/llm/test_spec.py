from __future__ import annotations

import pytest

from chunkwise.errors import BadInput
from chunkwise.llm import GenerationParams, Request, load_llm, parse_spec
from chunkwise.llm.backend_options import HfOptions, VllmOptions
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.llm.spec import spec_options


def test_parse_forms(tmp_path):
    s = parse_spec("hf:default?ctx=8192&chat=off")
    assert (s.backend, s.target, s.options) == ("hf", "default", {"ctx": "8192", "chat": "off"})
    o = spec_options(s, HfOptions)
    assert o.ctx == 8192 and o.chat is False
    s = parse_spec("hf:meta-llama/Llama-3.1-8B+adapter=/tmp/lora")
    assert (s.target, s.adapter) == ("meta-llama/Llama-3.1-8B", "/tmp/lora")
    s = parse_spec("openai:gpt-4o@http://127.0.0.1:8000/v1?concurrency=4")
    assert (s.backend, s.target, s.options["concurrency"]) == (
        "openai",
        "gpt-4o@http://127.0.0.1:8000/v1",
        "4",
    )
    assert spec_options(parse_spec("vllm:org/model?tp=8"), VllmOptions).tp == 8
    assert parse_spec(str(tmp_path)).backend == "hf"  # a checkpoint folder


@pytest.mark.parametrize(
    "bad", ["", "nonsense:model", "hf:", "hf:x+adapter=", "/no/such/folder", "hf:default?ctx"]
)
def test_bad_specs_list_valid_forms(bad):
    with pytest.raises(BadInput) as e:
        parse_spec(bad)
    assert "hf:default" in str(e.value) and "openai:MODEL@" in str(e.value)


def test_bad_option_values():
    with pytest.raises(BadInput, match="option ctx='big' is not valid; expected a whole number"):
        spec_options(parse_spec("hf:default?ctx=big"), HfOptions)
    with pytest.raises(BadInput, match="option chat='maybe' is not valid; expected true or false"):
        spec_options(parse_spec("hf:default?chat=maybe"), HfOptions)


def test_scripted_rules_stop_and_length():
    llm = ScriptedLLM(rules=[(r"key is (\d+)", r"The answer is \1. Done."), (r"echo", "x " * 50)])
    out = llm.generate(
        [
            Request("the key is 42", GenerationParams(stop=(". Done",))),
            Request("echo", GenerationParams(max_new_tokens=5)),
            Request("nothing matches"),
        ]
    )
    assert out[0].text == "The answer is 42" and out[0].finish_reason == "stop"
    assert out[1].finish_reason == "length" and out[1].completion_tokens == 5
    assert out[2].text == ""
    assert len(llm.calls) == 3
    assert load_llm("scripted:passkey").complete("... pass key is 98765 ...").text == "98765"


def test_generation_params_validate():
    with pytest.raises(ValueError):
        GenerationParams(max_new_tokens=0)
    with pytest.raises(ValueError):
        GenerationParams(temperature=-1)
