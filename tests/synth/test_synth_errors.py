"""Synthesis at scale: a document that fails after its retries is recorded and skipped, the run
goes on, exit status 3 and stats.json say how many; a rerun retries only those; the shards merge
into the same files whatever order they finish in."""

from __future__ import annotations

import json
from pathlib import Path

from synth_helpers import synth_llm, topic_text

from chunkwise.cli import main
from chunkwise.synth import SynthConfig, run_synth
from chunkwise.synth.outputs import load_dataset


def make_docs(root: Path, n: int, poison: int | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        text = topic_text(260, ["harbor", "mill", "orchard", "bridge", "school"][i % 5], seed=i)
        (root / f"d{i}.txt").write_text(text + (" POISON" if i == poison else ""))
    return root


def synth(docs: Path, out: Path, capsys) -> tuple[int, dict, str]:
    capsys.readouterr()
    rc = main(
        [
            "synth", "--docs", str(docs), "--out", str(out), "--model", "scripted:poison",
            "--embedder", "hashing", "--window", "1024", "--no-progress",
        ]
    )  # fmt: skip
    cap = capsys.readouterr()
    return rc, json.loads(cap.out.splitlines()[-1]), cap.err


def pyramid_ids(out: Path) -> list[str]:
    lines = (out / "pyramids" / "part-00000-of-00001.jsonl").read_text().splitlines()
    return [json.loads(x)["source_id"] for x in lines]


def test_a_failing_document_is_skipped_recorded_and_retried_by_a_rerun(tmp_path, capsys):
    docs, out = make_docs(tmp_path / "docs", 3, poison=1), tmp_path / "out"
    rc, summary, err = synth(docs, out, capsys)
    assert rc == 3 and summary["failed"] == 1
    assert "1 document(s) failed and were skipped" in err and "d1.txt" in err
    stats = json.loads((out / "stats.json").read_text())
    assert stats["documents"]["failed"] == 1 and stats["documents"]["total"] == 2
    [failed] = stats["failed_documents"]
    assert failed["source_id"] == "d1.txt" and "POISON in its prompt" in failed["error"]
    assert pyramid_ids(out) == ["d0.txt", "d2.txt"]  # the others were done

    (docs / "d1.txt").write_text((docs / "d1.txt").read_text().replace(" POISON", ""))
    rc, summary, _ = synth(docs, out, capsys)
    stats = json.loads((out / "stats.json").read_text())
    assert rc == 0 and summary["failed"] == 0 and stats["failed_documents"] == []
    assert pyramid_ids(out) == ["d0.txt", "d1.txt", "d2.txt"]


def test_shards_merge_the_same_whatever_order_they_finish_in(tmp_path):
    docs = make_docs(tmp_path / "docs", 6)
    outs = []
    for name, order in (("a", (0, 1)), ("b", (1, 0))):
        out = tmp_path / name
        for shard in order:
            cfg = SynthConfig(
                docs=str(docs), out=str(out), window=1024, embedder="hashing", progress=False,
                num_shards=2, shard_index=shard, concurrency=3 if name == "a" else 1,
            )  # fmt: skip
            run_synth(cfg, llm=synth_llm(window=1024))
        outs.append(out)
    a, b = outs
    for part in ("part-00000-of-00002", "part-00001-of-00002"):
        assert (a / "data" / f"{part}.jsonl").read_bytes() == (
            b / "data" / f"{part}.jsonl"
        ).read_bytes()
    assert load_dataset(a).to_list() == load_dataset(b).to_list()
    sa, sb = (json.loads((o / "stats.json").read_text()) for o in outs)
    assert sa["documents"] == sb["documents"] and sa["examples"] == sb["examples"] > 0


def test_a_bad_request_fails_only_its_own_document_in_a_merged_batch():
    import threading

    from chunkwise.errors import LLMRequestError
    from chunkwise.llm import GenerationParams, Request, load_llm
    from chunkwise.synth.calls import BatchingLLM

    shared = BatchingLLM(load_llm("scripted:poison"), max_wait_s=30)
    got: dict[str, object] = {}
    ready = threading.Barrier(2)

    def worker(name: str, prompt: str) -> None:
        with shared.worker():
            ready.wait()  # both registered: the batch waits for both
            try:
                got[name] = shared.generate([Request(prompt, GenerationParams(max_new_tokens=4))])
            except LLMRequestError as e:
                got[name] = e

    threads = [
        threading.Thread(target=worker, args=("good", "a fine prompt")),
        threading.Thread(target=worker, args=("bad", "a POISON prompt")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert shared.batches[0] == (2, 2)  # the two documents' calls went out as one batch
    assert isinstance(got["bad"], LLMRequestError)
    assert isinstance(got["good"], list) and got["good"][0].finish_reason == "stop"
