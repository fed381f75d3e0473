"""Issue #46: every backend declares its ``?key=value`` options once (a dataclass in
chunkwise.llm.backend_options, a comment per option); spec text goes through the one converter;
unknown keys are refused listing the valid ones; docs/models.md shows the generated tables."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from chunkwise.config import field_docs
from chunkwise.errors import BadInput
from chunkwise.llm.backend_options import BACKEND_OPTIONS, HfOptions, markdown
from chunkwise.llm.spec import parse_spec, spec_options

DOCS = Path(__file__).resolve().parents[2] / "docs" / "models.md"
TARGETS = {
    "hf": "default",
    "vllm": "org/name",
    "openai": "m@http://127.0.0.1:1/v1",
    "llamacpp": "default",
    "scripted": "echo",
}


@pytest.mark.parametrize("backend", sorted(BACKEND_OPTIONS))
def test_every_option_has_a_doc_comment(backend):
    cls = BACKEND_OPTIONS[backend]
    names = [f.name for f in dataclasses.fields(cls)]
    assert sorted(field_docs(cls)) == sorted(names)


@pytest.mark.parametrize("backend", sorted(BACKEND_OPTIONS))
def test_defaults_bad_values_and_unknown_keys(backend):
    cls = BACKEND_OPTIONS[backend]
    spec = parse_spec(f"{backend}:{TARGETS[backend]}")
    assert spec_options(spec, cls) == cls()
    bad = parse_spec(f"{backend}:{TARGETS[backend]}?ctx=lots")
    with pytest.raises(BadInput) as e:
        spec_options(bad, cls)
    assert str(e.value).startswith(
        f"model spec {bad.raw!r}: option ctx='lots' is not valid; expected a whole number"
    )
    unknown = parse_spec(f"{backend}:{TARGETS[backend]}?cxt=1")
    with pytest.raises(BadInput) as e:
        spec_options(unknown, cls)
    msg = str(e.value)
    assert "unknown option(s) cxt (did you mean 'ctx'?); valid options: " in msg
    assert all(f.name in msg for f in dataclasses.fields(cls))


def test_text_is_read_by_the_declared_type():
    spec = parse_spec("hf:default?ctx=1e3&chat=on&merge=0&prefill_chunk=none&dtype=bfloat16")
    got = spec_options(spec, HfOptions)
    assert (got.ctx, got.chat, got.merge, got.prefill_chunk, got.dtype) == (
        1000,
        True,
        False,
        None,
        "bfloat16",
    )
    assert spec_options(parse_spec("hf:default?chat=auto"), HfOptions).chat == "auto"


def test_a_value_the_backend_refuses_is_shown_as_written():
    with pytest.raises(BadInput, match=r"option tp='0' is not valid; expected a whole number >= 1"):
        spec_options(parse_spec("vllm:org/name?tp=0"), BACKEND_OPTIONS["vllm"])
    with pytest.raises(BadInput, match=r"option gpu_mem='1.5' .*expected a number in \(0, 1\]"):
        spec_options(parse_spec("vllm:org/name?gpu_mem=1.5"), BACKEND_OPTIONS["vllm"])


def test_docs_show_the_generated_tables():
    assert markdown() in DOCS.read_text(encoding="utf-8"), (
        "docs/models.md is out of date: paste `python -m chunkwise.llm.backend_options` "
        "between its generated markers"
    )
