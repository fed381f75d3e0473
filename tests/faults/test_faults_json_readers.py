"""Hostile JSON/JSONL against every reader: deep nesting (a line of 200,000 ``[``), bad UTF-8,
lone surrogates, NaN/Infinity, truncation, huge lines. Each reader either skips the line
(where that is its documented policy) or raises one :class:`BadInput` line naming the file
and line; never a RecursionError or any other traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chunkwise import io as cio
from chunkwise.errors import BadInput
from chunkwise.io import JSONInputError, JsonlAppender, parse_json, read_json, read_jsonl
from chunkwise.io import jsonl as cio_jsonl

from .attacks import BAD_LINES

GOOD_1 = b'{"id": "g1", "text": "The first document is fine."}\n'
GOOD_2 = b'{"id": "g2", "text": "The last document is fine too."}\n'


def jsonl_with(tmp_path: Path, name: str, bad: bytes) -> Path:
    """good line, the bad line, good line (a truncated last line stays last)."""
    p = tmp_path / f"{name}.jsonl"
    p.write_bytes(GOOD_1 + bad if name == "truncated_last" else GOOD_1 + bad + GOOD_2)
    return p


def one_line(e: BaseException, path: Path, line: int | None = None) -> str:
    msg = str(e)
    assert "\n" not in msg and len(msg) < 600, msg
    assert str(path) + (f":{line}:" if line else "") in msg, msg
    return msg


@pytest.mark.parametrize("name", list(BAD_LINES))
def test_read_jsonl_names_file_and_line_or_skips(tmp_path, name):
    p = jsonl_with(tmp_path, name, BAD_LINES[name])
    with pytest.raises(BadInput) as e:
        list(read_jsonl(p))
    one_line(e.value, p, 2)
    kept = [r["id"] for _, r in read_jsonl(p, skip_bad_lines=True)]
    assert kept == (["g1"] if name == "truncated_last" else ["g1", "g2"])


def test_deep_nesting_message_says_what_is_wrong(tmp_path):
    p = jsonl_with(tmp_path, "deep_array", BAD_LINES["deep_array"])
    with pytest.raises(
        BadInput, match=r"deep_array\.jsonl:2: not valid JSON \(nested deeper than 256 levels\)"
    ):
        list(read_jsonl(p))


@pytest.mark.parametrize("name", [n for n in BAD_LINES if n != "not_an_object"])
def test_read_json_whole_file(tmp_path, name):
    p = tmp_path / "x.json"
    p.write_bytes(BAD_LINES[name])
    with pytest.raises(BadInput) as e:
        read_json(p)
    assert one_line(e.value, p).startswith(f"{p}: not valid JSON (")


# lines a resumable writer may have left: older writers wrote NaN, so those still resume
RESUMABLE = {"nan", "infinity", "overflow"}


@pytest.mark.parametrize("name", list(BAD_LINES))
def test_appender_refuses_or_recovers_never_crashes(tmp_path, name):
    p = tmp_path / "ledger.jsonl"
    p.write_bytes(GOOD_1 + BAD_LINES[name])
    if name == "truncated_last":  # what a kill mid-write leaves: dropped, resumable
        with JsonlAppender(p) as ap:
            assert ap.done == {"g1"} and ap.recovered_partial_line
        return
    if name in RESUMABLE:
        with JsonlAppender(p) as ap:
            assert ap.done == {"g1", 1}
        return
    with pytest.raises(BadInput) as e:
        JsonlAppender(p)
    one_line(e.value, p, 2)
    assert p.read_bytes() == GOOD_1 + BAD_LINES[name]  # nothing truncated or rewritten


@pytest.mark.parametrize("name", list(BAD_LINES))
def test_synth_docs_skip_bad_lines_and_count_them(tmp_path, name):
    from chunkwise.synth.sources import SourceDoc, SourceSkip, iter_source

    p = jsonl_with(tmp_path, name, BAD_LINES[name])
    items = list(iter_source(str(p)))
    docs = [i.source_id for i in items if isinstance(i, SourceDoc)]
    skips = [i for i in items if isinstance(i, SourceSkip)]
    assert docs == (["g1"] if name == "truncated_last" else ["g1", "g2"])
    assert [s.reason for s in skips] == ["bad_json_line"] and skips[0].origin == f"{p}:2"


@pytest.mark.parametrize("name", ["deep_array", "invalid_utf8", "nan", "not_an_object"])
def test_data_loaders_name_file_and_line(tmp_path, name):
    from chunkwise.benchmarks.leval.loader import load_leval
    from chunkwise.benchmarks.qasper.loader import load_qasper
    from chunkwise.benchmarks.quality.loader import load_quality
    from chunkwise.train.formats import read_records

    loaders = {
        "qasper.jsonl": lambda p: load_qasper(str(p)),
        "QuALITY.v1.0.1.htmlstripped.dev": lambda p: load_quality(p),
        "narrative_qa.jsonl": lambda p: load_leval("narrative_qa", p),
        "train.jsonl": lambda p: list(read_records([p])),
    }
    for fname, load in loaders.items():
        p = tmp_path / name / fname
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(BAD_LINES[name])
        try:
            load(p)
        except BadInput as e:
            one_line(e, p, 1)
        else:  # pragma: no cover - the assertion message names the loader
            raise AssertionError(f"{fname}: {name} was accepted")


def test_qasper_whole_file_json(tmp_path):
    from chunkwise.benchmarks.qasper.loader import load_qasper

    p = tmp_path / "qasper-dev-v0.3.json"
    p.write_bytes(BAD_LINES["deep_object"])
    with pytest.raises(BadInput) as e:
        load_qasper(str(p))
    one_line(e.value, p)


def test_demo_and_synth_ledgers_and_adapter_metadata(tmp_path):
    from chunkwise.demo import Demo, get_size
    from chunkwise.llm import load_llm
    from chunkwise.synth import SynthConfig, run_synth

    deep = BAD_LINES["deep_array"]
    demo_out = tmp_path / "demo"
    demo_out.mkdir()
    (demo_out / "demo.json").write_bytes(deep)
    with pytest.raises(BadInput) as e:
        Demo(demo_out, get_size("smoke")).load_state()
    one_line(e.value, demo_out / "demo.json")

    synth_out = tmp_path / "synth"
    synth_out.mkdir()
    (synth_out / "config.json").write_bytes(deep)
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("A short document.")
    with pytest.raises(BadInput, match="config.json is not valid JSON"):
        run_synth(SynthConfig(docs=str(docs), out=str(synth_out), embedder="hashing"))

    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    (adapter / "chunkwise_model.json").write_bytes(deep)
    with pytest.raises(BadInput) as e:
        load_llm(str(adapter))
    one_line(e.value, adapter / "chunkwise_model.json")


# ------------------------------------------------------------------ fuzzing (hypothesis)

FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=20,
)


def accepted_or_refused(data: bytes | str) -> None:
    """parse_json's whole contract: a value, or a one-line JSONInputError."""
    try:
        parse_json(data)
    except JSONInputError as e:
        assert "\n" not in str(e) and len(str(e)) < 300


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_any_bytes(data):
    accepted_or_refused(data)


@FUZZ
@given(
    depth=st.integers(1, 3000),
    opener=st.sampled_from(["[", '{"k":', "[1,", '[{"a":']),
    closed=st.booleans(),
)
def test_fuzz_nesting_depth(depth, opener, closed):
    closer = {"[": "]", '{"k":': "}", "[1,": "]", '[{"a":': "}]"}[opener]
    text = opener * depth + ("0" + closer * depth if closed else "")
    levels = depth * (2 if opener == '[{"a":' else 1)
    if closed and levels <= cio.MAX_JSON_DEPTH:
        parse_json(text)
    else:
        with pytest.raises(JSONInputError):
            parse_json(text)


@FUZZ
@given(value=st.dictionaries(st.text(max_size=8), json_values, max_size=5), cut=st.floats(0, 1))
def test_fuzz_truncated_last_line(tmp_path_factory, value, cut):
    p = tmp_path_factory.mktemp("trunc") / "t.jsonl"
    line = json.dumps(value).encode()
    part = line[: int(len(line) * cut)]
    p.write_bytes(GOOD_1 + part)
    try:
        got = [r for _, r in read_jsonl(p)]
    except BadInput as e:
        msg = one_line(e, p, 2)
        assert "no newline" in msg
    else:
        assert got[0]["id"] == "g1" and len(got) in (1, 2)
    assert next(r["id"] for _, r in read_jsonl(p, skip_bad_lines=True)) == "g1"


@FUZZ
@given(
    value=st.dictionaries(st.text(max_size=8), json_values, min_size=1, max_size=5),
    pos=st.floats(0, 1),
    junk=st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x80\x80", b"\x00"]),
)
def test_fuzz_encoding_damage(tmp_path_factory, value, pos, junk):
    p = tmp_path_factory.mktemp("enc") / "e.jsonl"
    line = json.dumps(value, ensure_ascii=False).encode()
    i = int(len(line) * pos)
    p.write_bytes(GOOD_1 + line[:i] + junk + line[i:] + b"\n" + GOOD_2)
    try:
        got = [r for _, r in read_jsonl(p)]
    except BadInput as e:
        one_line(e, p, 2)
    else:
        assert len(got) == 3
    assert [r["id"] for _, r in read_jsonl(p, skip_bad_lines=True)][-1] == "g2"


@FUZZ
@given(sizes=st.lists(st.integers(0, 300), min_size=1, max_size=6))
def test_fuzz_huge_lines(tmp_path_factory, monkeypatch, sizes):
    monkeypatch.setattr(cio_jsonl, "MAX_LINE_BYTES", 100)  # where the reader reads it
    p = tmp_path_factory.mktemp("huge") / "h.jsonl"
    lines = [json.dumps({"id": i, "pad": "x" * n}).encode() + b"\n" for i, n in enumerate(sizes)]
    p.write_bytes(b"".join(lines))
    fits = [i for i, ln in enumerate(lines) if len(ln) <= 101]
    got = [(n, r["id"]) for n, r in read_jsonl(p, skip_bad_lines=True)]
    assert got == [(i + 1, i) for i in fits]  # line numbers stay right after a skipped line
    if len(fits) < len(lines):
        with pytest.raises(BadInput, match="longer than 100 bytes"):
            list(read_jsonl(p))


@FUZZ
@given(value=json_values, bad=st.sampled_from([float("nan"), float("inf"), float("-inf")]))
def test_fuzz_writers_write_only_what_readers_read(tmp_path_factory, value, bad):
    folder = tmp_path_factory.mktemp("w")
    record = {"id": "r", "value": value, "bad": bad, "nested": [{"x": bad}]}
    with JsonlAppender(folder / "a.jsonl") as ap:
        ap.write(record)
    (_, got), *_ = list(read_jsonl(folder / "a.jsonl"))
    assert got["bad"] is None and got["nested"] == [{"x": None}] and got["value"] == value
    cio.atomic_write_json(folder / "b.json", record)
    assert read_json(folder / "b.json")["bad"] is None
