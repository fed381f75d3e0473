"""`chunkwise synth` never reports success on failure and never takes over a folder it did
not make: a dead server or a failing model exits non-zero with no complete-looking
``dataset/``/``stats.json``; bad arguments fail before any work; a foreign ``--out`` is
refused untouched."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from chunkwise.errors import ChunkwiseError, LLMRequestError
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.synth import SynthConfig, run_synth
from chunkwise.synth.build import SynthFailed


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed on exit: nothing listens there


def make_docs(root: Path, n: int = 2) -> Path:
    root.mkdir()
    for i in range(n):
        words = " ".join(f"The harbor council met on day {j} about mill {i}." for j in range(60))
        (root / f"d{i}.txt").write_text(words)
    return root


def test_dead_server_exits_non_zero_and_writes_no_dataset(cli, tmp_path):
    docs, out = make_docs(tmp_path / "docs"), tmp_path / "out"
    model = f"openai:m@http://127.0.0.1:{closed_port()}/v1?retries=0"
    res = cli(
        "synth", "--docs", docs, "--out", out, "--model", model,
        "--embedder", "hashing", "--window", "1024", "--no-progress",
    )  # fmt: skip
    msg = res.error_line()
    assert "2 of 2 documents failed (LLMRequestError: 2)" in msg and "rerun" in msg
    assert not (out / "dataset").exists() and not (out / "stats.json").exists()
    assert res.out == ""  # no success summary


@pytest.mark.parametrize(
    "args, needle",
    [
        (
            ["--chunk-tokens", "-5"],
            "--chunk-tokens: option chunk_tokens='-5' is not valid; expected a whole number >= 0",
        ),
        (
            ["--concurrency", "0"],
            "--concurrency: option concurrency='0' is not valid; expected a whole number >= 1",
        ),
        (
            ["--questions-per-doc", "0"],
            "--questions-per-doc: option questions_per_doc='0' is not valid",
        ),
        (
            ["--window", "100"],
            "--window: option window='100' is not valid; expected a whole number >= 256",
        ),
        (
            ["--limit", "-1"],
            "--limit: option limit='-1' is not valid; expected a whole number >= 0",
        ),
        (
            ["--num-shards", "2", "--shard-index", "5"],
            "--shard-index: option shard_index='5' is not valid; expected a whole number in [0, num_shards=2)",
        ),
    ],
)
def test_bad_arguments_fail_before_any_work(cli, tmp_path, args, needle):
    docs, out = make_docs(tmp_path / "docs"), tmp_path / "out"
    model = f"openai:m@http://127.0.0.1:{closed_port()}/v1?retries=0"
    res = cli("synth", "--docs", docs, "--out", out, "--model", model, *args)
    assert needle in res.error_line()
    assert not out.exists()  # nothing made, no model loaded


def test_a_folder_synth_did_not_make_is_refused_untouched(cli, tmp_path):
    docs, out = make_docs(tmp_path / "docs"), tmp_path / "project"
    (out / "dataset").mkdir(parents=True)
    (out / "dataset" / "data.arrow").write_bytes(b"precious")
    (out / "stats.json").write_text('{"mine": true}')
    res = cli("synth", "--docs", docs, "--out", out, "--model", "scripted:echo")
    assert "did not write" in res.error_line()
    assert (out / "dataset" / "data.arrow").read_bytes() == b"precious"
    assert (out / "stats.json").read_text() == '{"mine": true}'
    assert sorted(p.name for p in out.iterdir()) == ["dataset", "stats.json"]


class FailingLLM(ScriptedLLM):
    def _generate(self, requests):
        raise LLMRequestError("the server went away")


def test_failed_documents_are_retried_by_a_rerun(tmp_path):
    docs, out = make_docs(tmp_path / "docs", 3), tmp_path / "out"
    cfg = dict(docs=str(docs), out=str(out), window=1024, embedder="hashing", progress=False)
    with pytest.raises(SynthFailed, match="3 of 3 documents failed") as e:
        run_synth(SynthConfig(**cfg), llm=FailingLLM())
    assert isinstance(e.value, ChunkwiseError)  # the CLI prints one line, exit 2
    assert not (out / "stats.json").exists() and not (out / "dataset").exists()
    stats = run_synth(SynthConfig(**cfg), llm=ScriptedLLM(default=""))  # a model that answers
    assert stats["documents"]["total"] == 3 and (out / "stats.json").exists()
    assert (out / "dataset").is_dir()


def test_a_source_with_no_usable_document_is_an_error_naming_the_line(cli, tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_bytes(b"[" * 200_000 + b"\n")
    out = tmp_path / "out"
    model = f"openai:m@http://127.0.0.1:{closed_port()}/v1?retries=0"
    res = cli("synth", "--docs", docs, "--out", out, "--model", model, "--embedder", "hashing")
    assert f"first: {docs}:1: bad_json_line" in res.error_line()
    assert not (out / "dataset").exists() and not (out / "stats.json").exists()


# -- the oracle teacher: kill-safe appends, settings check, atomic stats --------------------

ORACLE_ARGS = dict(families=["passkey", "kv_retrieval"], lengths=[1500], n=3, progress=False)


def oracle_counter() -> ScriptedLLM:
    llm = ScriptedLLM(default="", window=2048)
    llm.chat = True
    return llm


def oracle_lines(out: Path) -> list[dict]:
    """Every line of the oracle's output parsed (a glued or torn line fails here)."""
    text = (out / "data" / "oracle.jsonl").read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_oracle_resume_after_a_torn_last_line_writes_every_record_once(tmp_path):
    from chunkwise.synth.oracle import run_oracle

    full = tmp_path / "full"
    run_oracle(oracle_counter(), full, **ORACLE_ARGS)
    want = oracle_lines(full)
    assert len(want) == 6
    out = tmp_path / "torn"
    run_oracle(oracle_counter(), out, **ORACLE_ARGS)
    path = out / "data" / "oracle.jsonl"
    raw = path.read_bytes()
    last = raw[:-1].rfind(b"\n") + 1  # start of the last line
    path.write_bytes(raw[: last + (len(raw) - last) // 2])  # a kill in the middle of it
    stats = run_oracle(oracle_counter(), out, **ORACLE_ARGS)
    got = oracle_lines(out)
    assert got == want  # every record once, in order, none glued to a torn fragment
    assert stats["records"] == 6 and stats["new_examples_by_stage"]["reduce"] == 1
    assert stats["torn_line_dropped"] is True


def test_oracle_real_sigkill_then_rerun_equals_an_uninterrupted_run(tmp_path):
    """`chunkwise synth --teacher oracle` SIGKILLed once its first records are on disk; the
    rerun finishes the same records an uninterrupted run writes, each once, all parseable."""
    import signal
    import subprocess
    import sys
    import time

    def argv(out: Path) -> list[str]:
        return [
            sys.executable, "-c", "from chunkwise.cli import main; raise SystemExit(main())",
            "synth", "--teacher", "oracle", "--model", "scripted:echo", "--out", str(out),
            "--families", "passkey,kv_retrieval,conflicting", "--lengths", "4000",
            "--n", "60", "--no-progress",
        ]  # fmt: skip

    killed = tmp_path / "killed"
    path = killed / "data" / "oracle.jsonl"
    proc = subprocess.Popen(argv(killed), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if path.exists() and path.stat().st_size > 0:
                break
            time.sleep(0.002)  # polling the file, not timing the child
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.stderr}"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    partial = path.read_bytes().count(b"\n")
    assert 0 < partial < 180, partial  # killed mid-run
    assert not (killed / "stats.json").exists()  # no complete-looking stats for a killed run
    for out in (killed, tmp_path / "whole"):
        done = subprocess.run(argv(out), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr
    got, want = oracle_lines(killed), oracle_lines(tmp_path / "whole")
    ids = [r["id"] for r in got]
    assert len(ids) == len(set(ids)) == 180
    assert got == want
    assert json.loads((killed / "stats.json").read_text())["records"] == 180


def test_oracle_rerun_with_other_settings_is_refused_unless_overridden(tmp_path, cli):
    from chunkwise.errors import BadInput
    from chunkwise.synth.oracle import run_oracle

    run_oracle(oracle_counter(), tmp_path, **ORACLE_ARGS)
    before = (tmp_path / "data" / "oracle.jsonl").read_bytes()
    changed = {**ORACLE_ARGS, "n": 4, "lengths": [2000]}
    with pytest.raises(
        BadInput, match=r"other settings \(lengths: \[1500\] -> \[2000\], n: 3 -> 4\)"
    ):
        run_oracle(oracle_counter(), tmp_path, **changed)
    assert (tmp_path / "data" / "oracle.jsonl").read_bytes() == before  # untouched
    stats = run_oracle(oracle_counter(), tmp_path, **changed, override_settings=True)
    assert stats["records"] == 8 and stats["records_in_file"] == 14  # 6 from before
    assert len(oracle_lines(tmp_path)) == 14
    assert json.loads((tmp_path / "config.json").read_text())["n"] == 4
    # the command line names the setting and the flag that overrides it
    out = tmp_path / "cli"
    base = ["synth", "--teacher", "oracle", "--model", "scripted:echo", "--out", out,
            "--families", "passkey", "--lengths", "1500", "--no-progress"]  # fmt: skip
    assert cli(*base, "--n", "1").rc == 0
    msg = cli(*base, "--n", "2").error_line()
    assert "n: 1 -> 2" in msg and "--override-settings" in msg
    assert cli(*base, "--n", "2", "--override-settings").rc == 0


class _HalfWrite:
    """A file whose first write stores half its data and then fails (the disk filled up, or
    the process died mid-write)."""

    def __init__(self, f):
        self._f = f

    def write(self, data):
        self._f.write(data[: len(data) // 2])
        self._f.flush()
        raise OSError(28, "No space left on device")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._f.close()

    def __getattr__(self, name):
        return getattr(self._f, name)


def test_oracle_stats_json_is_never_left_half_written(tmp_path, monkeypatch):
    import io
    import os

    from chunkwise.synth.oracle import run_oracle

    run_oracle(oracle_counter(), tmp_path, **ORACLE_ARGS)
    stats = tmp_path / "stats.json"
    before = stats.read_text()
    real_open = io.open

    def failing_open(file, mode="r", *args, **kwargs):
        f = real_open(file, mode, *args, **kwargs)
        name = os.readlink(f"/proc/self/fd/{file}") if isinstance(file, int) else str(file)
        if any(c in mode for c in "wax+") and "stats.json" in os.path.basename(name):
            return _HalfWrite(f)  # the stats file itself or a temporary copy of it
        return f

    monkeypatch.setattr(io, "open", failing_open)
    with pytest.raises(OSError, match="No space left"):
        run_oracle(oracle_counter(), tmp_path, **ORACLE_ARGS)
    monkeypatch.undo()
    assert stats.read_text() == before  # the old stats, whole
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []
