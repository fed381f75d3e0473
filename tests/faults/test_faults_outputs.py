"""Failures that used to come after the work was done (a traceback, the work lost): output
paths that cannot be written, non-finite numbers in specs and decoding settings. Each is now
refused first, as one line with exit 2. The model is a server that is not there, so a check
that came after the work would show up as a connection error instead."""

from __future__ import annotations

import socket

import pytest

from chunkwise.errors import BadInput, BadParams
from chunkwise.io import check_output_dir, check_output_file
from chunkwise.llm import GenerationParams


@pytest.fixture
def dead_model() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"openai:m@http://127.0.0.1:{port}/v1?retries=0"


@pytest.fixture
def doc(tmp_path):
    p = tmp_path / "doc.txt"
    p.write_text("The pass key is 12345. " * 20)
    return p


@pytest.mark.parametrize("where", ["dir", "under_file"])
def test_answer_trace_is_checked_before_the_answer(cli, tmp_path, dead_model, doc, where):
    (tmp_path / "afile").write_text("x")
    trace = tmp_path if where == "dir" else tmp_path / "afile" / "trace.json"
    res = cli("answer", "--model", dead_model, "--doc", doc, "--question", "q", "--trace", trace)
    msg = res.error_line()
    assert msg.startswith("chunkwise answer: error: --trace ") and str(trace) in msg


def test_generate_data_out_under_a_file_is_refused_before_generating(cli, tmp_path, monkeypatch):
    import chunkwise.data.synthetic as synthetic

    def no_work(*a, **k):
        raise AssertionError("examples were generated before --out was checked")

    monkeypatch.setattr(synthetic, "generate", no_work)
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "sub" / "data.jsonl"
    res = cli("generate-data", "--task", "passkey", "--length", "200", "--n", "2", "--out", out)
    assert "afile is a file, not a folder" in res.error_line()
    assert (tmp_path / "afile").read_text() == "x"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "abc"])
@pytest.mark.parametrize("option", ["timeout", "backoff"])
def test_openai_spec_numbers_must_be_finite(cli, dead_model, option, value):
    res = cli("generate", "--model", f"{dead_model}&{option}={value}", "--prompt", "hi")
    assert f"option {option}={value!r}" in res.error_line()


def test_timeout_zero_is_refused_too(cli, dead_model):
    line = cli("generate", "--model", f"{dead_model}&timeout=0", "--prompt", "x").error_line()
    assert "option timeout='0' is not valid; expected a finite number > 0" in line


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1"])
def test_temperature_is_checked_in_one_place(cli, dead_model, doc, value):
    res = cli("generate", "--model", dead_model, "--prompt", "hi", f"--temperature={value}")
    assert "temperature must be a finite number >= 0" in res.error_line()
    for strategy in ("standard", "mapreduce"):
        res = cli(
            "answer", "--model", dead_model, "--doc", doc, "--question", "q",
            "--strategy", strategy, "--strategy-args", f"temperature={value}",
        )  # fmt: skip
        assert "temperature must be a finite number >= 0" in res.error_line()
    with pytest.raises(BadParams):  # a ValueError too, for code that validates that way
        GenerationParams(temperature=float(value))
    assert issubclass(BadParams, ValueError) and issubclass(BadParams, BadInput)


def test_output_checks(tmp_path):
    (tmp_path / "f").write_text("x")
    assert check_output_file(tmp_path / "new" / "deeper" / "a.json") == (
        tmp_path / "new" / "deeper" / "a.json"
    )
    assert not (tmp_path / "new").exists()  # checking creates nothing
    with pytest.raises(BadInput, match="is a folder"):
        check_output_file(tmp_path)
    with pytest.raises(BadInput, match="is a file, not a folder"):
        check_output_file(tmp_path / "f" / "a.json")
    with pytest.raises(BadInput, match="is a file"):
        check_output_dir(tmp_path / "f")
    with pytest.raises(BadInput, match="is a file, not a folder"):
        check_output_dir(tmp_path / "f" / "d")
    assert check_output_dir(tmp_path / "n" / "d") == tmp_path / "n" / "d"
