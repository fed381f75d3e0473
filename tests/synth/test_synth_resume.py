"""Kill a synthesis run at an arbitrary point, rerun, and get exactly the uninterrupted result."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from synth_helpers import synth_llm, topic_text

from chunkwise.synth import SynthConfig, run_synth, validate_record

HERE = Path(__file__).resolve().parent

RUNNER = """
import sys
from synth_helpers import synth_llm
from chunkwise.synth import SynthConfig, run_synth
docs, out, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
cfg = SynthConfig(docs=docs, out=out, model="scripted:test", window=1024, questions_per_doc=2,
                  embedder="hashing", concurrency=2, progress=False)
run_synth(cfg, llm=synth_llm(1024, delay=delay))
"""


def make_docs(root: Path, n: int = 8) -> None:
    root.mkdir(parents=True)
    topics = ["harbor", "council", "treaty", "river", "mill", "guild", "ferry", "market", "winter"]
    for i in range(n):
        text = "\n\n".join(topic_text(110, t, i) for t in topics[i % 3 : i % 3 + 3])
        (root / f"doc{i:02d}.txt").write_text(text)


def cfg(docs: Path, out: Path) -> SynthConfig:
    return SynthConfig(
        docs=str(docs),
        out=str(out),
        model="scripted:test",
        window=1024,
        questions_per_doc=2,
        embedder="hashing",
        concurrency=2,
        progress=False,
    )


def ledger_lines(out: Path) -> list[dict]:
    path = out / "work" / "docs-part-00000-of-00001.jsonl"
    if not path.exists():
        return []
    return [
        json.loads(x) for x in path.read_bytes().decode().splitlines() if x.strip().endswith("}")
    ]


def records(out: Path) -> list[dict]:
    text = (out / "data" / "part-00000-of-00001.jsonl").read_text()
    return [json.loads(x) for x in text.splitlines() if x.strip()]


def test_kill_and_resume_loses_and_duplicates_nothing(tmp_path):
    docs = tmp_path / "docs"
    make_docs(docs)
    reference = tmp_path / "reference"
    run_synth(cfg(docs, reference), llm=synth_llm(1024))
    want = sorted((r["id"], r["question"], r["answer"]) for r in records(reference))
    assert len(want) >= 8

    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": f"{HERE}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, str(docs), str(out), "0.01"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 120
    while time.time() < deadline and len(ledger_lines(out)) < 2 and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    done_before = len(ledger_lines(out))
    assert 2 <= done_before < 8, "the run should have been killed part way"
    assert not (out / "stats.json").exists()

    stats = run_synth(cfg(docs, out), llm=synth_llm(1024))  # the rerun continues
    lines = ledger_lines(out)
    ids = [e["source_id"] for e in lines]
    assert len(ids) == len(set(ids)) == 8
    got = sorted((r["id"], r["question"], r["answer"]) for r in records(out))
    assert got == want
    assert all(validate_record(r) == [] for r in records(out))
    assert stats["documents"]["total"] == 8 and stats["runs"] == 1  # the killed run never finished
    runs = (out / "work" / "runs-part-00000-of-00001.jsonl").read_text().splitlines()
    assert len(runs) == 1 and json.loads(runs[0])["processed"] == 8 - done_before


def test_a_half_written_ledger_line_is_dropped_and_redone(tmp_path):
    docs = tmp_path / "docs"
    make_docs(docs, 3)
    out = tmp_path / "out"
    run_synth(cfg(docs, out), llm=synth_llm(1024))
    ledger = out / "work" / "docs-part-00000-of-00001.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    ledger.write_bytes(b"".join(lines[:2]) + lines[2][: len(lines[2]) // 2])  # killed mid-write
    first = {json.loads(x)["source_id"] for x in lines[:2]}
    stats = run_synth(cfg(docs, out), llm=synth_llm(1024))
    assert stats["documents"]["total"] == 3
    ids = [json.loads(x)["source_id"] for x in ledger.read_text().splitlines()]
    assert len(ids) == 3 and set(ids) >= first


def test_rerun_of_a_finished_folder_calls_no_model(tmp_path):
    docs = tmp_path / "docs"
    make_docs(docs, 2)
    out = tmp_path / "out"
    run_synth(cfg(docs, out), llm=synth_llm(1024))
    before = records(out)
    again = synth_llm(1024)
    run_synth(cfg(docs, out), llm=again)
    assert again.calls == [] and records(out) == before


def test_count_source_and_shard_totals(tmp_path):
    from chunkwise.synth.build import _shard_total
    from chunkwise.synth.config import SynthConfig
    from chunkwise.synth.sources import count_source

    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(5):
        (folder / f"d{i}.txt").write_text("text")
    (folder / ".hidden").write_text("x")
    assert count_source(str(folder)) == 5
    jl = tmp_path / "docs.jsonl"
    jl.write_text('{"text": "a"}\n\n{"text": "b"}\n')
    assert count_source(str(jl)) == 2
    assert count_source("org/some-dataset") is None
    cfg = SynthConfig(docs=str(folder), out=str(tmp_path / "o"), num_shards=2, shard_index=1)
    assert _shard_total(cfg) == 2  # items 1 and 3
    cfg = SynthConfig(docs=str(folder), out=str(tmp_path / "o"), limit=3)
    assert _shard_total(cfg) == 3


def test_shards_come_from_the_launcher_unless_given():
    from chunkwise.commands.synth import shard_from_env

    assert shard_from_env(None, None, {}) == (1, 0)
    assert shard_from_env(None, None, {"WORLD_SIZE": "4", "RANK": "2"}) == (4, 2)
    assert shard_from_env(3, 1, {"WORLD_SIZE": "4", "RANK": "2"}) == (3, 1)
    assert shard_from_env(3, None, {"WORLD_SIZE": "4", "RANK": "2"}) == (3, 0)


def dies_after(llm, answered: int):
    """``llm``, interrupted (as a kill would) by the first batch that would take it past
    ``answered`` answered requests; that batch is answered to no one."""
    real = llm._generate

    def generate(requests):
        if len(llm.calls) + len(requests) > answered:
            raise KeyboardInterrupt
        return real(requests)

    llm._generate = generate
    return llm


def test_a_killed_run_resumes_inside_its_documents_from_their_kept_calls(tmp_path):
    docs = tmp_path / "docs"
    make_docs(docs, 4)
    reference = tmp_path / "reference"
    whole = synth_llm(1024)
    run_synth(cfg(docs, reference), llm=whole)
    want = sorted((r["id"], r["question"], r["answer"]) for r in records(reference))
    assert not (reference / "work" / "calls").exists()  # nothing to resume: no calls kept

    out = tmp_path / "out"
    # one document at a time, so the kill lands inside the second document (the first holds
    # 7 calls); with several, a kill can fall where no document in flight has finished a call
    first = dies_after(synth_llm(1024), 10)
    with pytest.raises(KeyboardInterrupt):
        run_synth(dataclasses.replace(cfg(docs, out), concurrency=1), llm=first)
    kept = list((out / "work" / "calls").glob("doc-*.jsonl"))
    assert kept, "the documents in flight keep their finished calls"
    assert len(ledger_lines(out)) < 4

    second = synth_llm(1024)
    run_synth(cfg(docs, out), llm=second)  # two at a time: the kept calls under the batcher
    got = sorted((r["id"], r["question"], r["answer"]) for r in records(out))
    assert got == want
    # every call answered before the kill is replayed, none asked again
    assert len(first.calls) + len(second.calls) == len(whole.calls)
    runs = (out / "work" / "runs-part-00000-of-00001.jsonl").read_text().splitlines()
    calls = json.loads(runs[-1])["calls"]
    assert calls["computed"] == len(second.calls) and calls["replayed"] > 0
    assert not (out / "work" / "calls").exists()  # every document finished: no file left


def test_a_finished_documents_leftover_calls_file_is_deleted_on_rerun(tmp_path):
    from chunkwise.synth.build import calls_name

    docs = tmp_path / "docs"
    make_docs(docs, 2)
    out = tmp_path / "out"
    run_synth(cfg(docs, out), llm=synth_llm(1024))
    sid = ledger_lines(out)[0]["source_id"]
    stale = out / "work" / "calls" / f"{calls_name(sid)}.jsonl"
    stale.parent.mkdir()
    stale.write_text("")  # killed between the ledger line and the file's deletion
    again = synth_llm(1024)
    run_synth(cfg(docs, out), llm=again)
    assert again.calls == [] and not stale.parent.exists()


def test_a_documents_unreadable_calls_file_fails_that_document_alone(tmp_path):
    """A kept-calls file with a malformed complete line cannot be resumed: its document fails
    with the error naming file:line, the other documents are synthesized, and once the line is
    gone a rerun finishes the failed one."""
    from chunkwise.synth.build import calls_name

    docs = tmp_path / "docs"
    make_docs(docs, 3)
    reference = tmp_path / "reference"
    run_synth(cfg(docs, reference), llm=synth_llm(1024))
    sids = sorted(line["source_id"] for line in ledger_lines(reference))

    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):  # killed inside its first document
        run_synth(
            dataclasses.replace(cfg(docs, out), concurrency=1), llm=dies_after(synth_llm(1024), 2)
        )
    bad = max((out / "work" / "calls").glob("doc-*.jsonl"), key=lambda p: p.stat().st_size)
    [sid] = [s for s in sids if calls_name(s) == bad.stem]
    lines = len(bad.read_text().splitlines())
    assert lines > 0
    with bad.open("a") as f:
        f.write('{"key": "k", "completion": \n')  # a complete line that is not JSON
    stats = run_synth(cfg(docs, out), llm=synth_llm(1024))
    failed = stats["failed_documents"]
    assert [f["source_id"] for f in failed] == [sid]
    assert f"{bad}:{lines + 1}: not valid JSON" in failed[0]["error"]
    assert sorted(line["source_id"] for line in ledger_lines(out)) == sorted(set(sids) - {sid})

    bad.write_text("".join(bad.read_text().splitlines(keepends=True)[:lines]))

    again = synth_llm(1024)
    run_synth(cfg(docs, out), llm=again)
    assert sorted(line["source_id"] for line in ledger_lines(out)) == sids
    assert not bad.parent.exists()
