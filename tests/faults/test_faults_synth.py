"""`chunkwise synth` never reports success on failure and never takes over a folder it did
not make: a dead server or a failing model exits non-zero with no complete-looking
``dataset/``/``stats.json``; bad arguments fail before any work; a foreign ``--out`` is
refused untouched."""

from __future__ import annotations

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
        (["--chunk-tokens", "-5"], "--chunk-tokens must be >= 0"),
        (["--concurrency", "0"], "--concurrency must be at least 1"),
        (["--questions-per-doc", "0"], "--questions-per-doc must be at least 1"),
        (["--window", "100"], "--window 100 is too small"),
        (["--limit", "-1"], "--limit must be >= 0"),
        (["--num-shards", "2", "--shard-index", "5"], "--shard-index must be in"),
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
