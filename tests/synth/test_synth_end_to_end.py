"""End to end with the scripted model: valid records, bad input counted, shards, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from synth_helpers import synth_llm, topic_text

from chunkwise.cli import main
from chunkwise.errors import BadInput
from chunkwise.synth import SynthConfig, load_dataset, run_synth, validate_record
from chunkwise.synth.records import META_KEYS, RECORD_KEYS


def make_folder(root: Path) -> dict[str, str]:
    root.mkdir(parents=True, exist_ok=True)
    docs = {
        "short.txt": topic_text(40, "lighthouse"),  # shorter than one chunk: a one-leaf pyramid
        "medium.txt": "\n\n".join(topic_text(120, t) for t in ("harbor", "council", "treaty")),
        "sub/long.txt": "\n\n".join(
            topic_text(150, t, i)
            for i, t in enumerate(
                ["river", "mill", "baker", "guild", "festival", "winter", "ferry", "market"]
            )
        ),
    }
    for name, text in docs.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "empty.txt").write_text("  \n\n ")
    (root / "binary.txt").write_bytes(b"\x00\x01\xff\xfe garbage")
    (root / "picture.png").write_bytes(b"\x89PNG\r\n")
    return docs


def cfg_for(docs: Path, out: Path, **kw) -> SynthConfig:
    base = dict(
        docs=str(docs),
        out=str(out),
        model="scripted:test",
        window=1024,
        questions_per_doc=2,
        embedder="hashing",
        concurrency=2,
        progress=False,
    )
    base.update(kw)
    return SynthConfig(**base)


def read_records(out: Path) -> list[dict]:
    recs = []
    for f in sorted((out / "data").glob("*.jsonl")):
        recs += [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    return recs


def check_record(rec: dict, texts: dict[str, str], pyramids: dict[str, dict], model: str) -> None:
    assert validate_record(rec) == [], validate_record(rec)
    assert tuple(rec) == RECORD_KEYS and tuple(rec["meta"]) == META_KEYS
    assert rec["document"] == texts[rec["source_id"]]
    assert rec["id"].startswith(rec["source_id"] + "#q")
    assert rec["question"].endswith("?") and rec["answer"] == "the answer is forty two"
    meta = rec["meta"]
    assert meta["model"] == model and meta["prompt_version"] == "synth-base-1"
    pyr = pyramids[rec["source_id"]]
    nodes = {n["id"]: n for n in pyr["nodes"]}
    node = nodes[meta["node_ids"][0]]
    assert node["level"] == meta["node_level"] and pyr["levels"] == meta["levels"]
    assert node["char_span"] == meta["char_span"] and node["leaves"] == meta["leaves"]
    kind = "root" if node["id"] == pyr["root"] else ("leaf" if node["level"] == 0 else "mid")
    assert meta["node_kind"] == kind
    mr = meta["mapreduce"]
    assert mr["prompt_kind"] == "base" and mr["prompt_version"].startswith("mr-base")
    chunks = mr["chunks"]
    assert len(rec["intermediate"]["map"]) == len(chunks)
    assert [r["sources"] for r in rec["intermediate"]["map"]] == [[i] for i in range(len(chunks))]
    for s, e in chunks:
        assert rec["document"][s:e].strip() == rec["document"][s:e]
    # node importance is kept per sentence
    assert all(len(s) == 3 and 0.0 <= s[2] <= 1.0 for s in node["sentences"])


def test_folder_end_to_end_valid_records_and_bad_input_counted(tmp_path):
    texts = make_folder(tmp_path / "docs")
    out = tmp_path / "out"
    stats = run_synth(cfg_for(tmp_path / "docs", out), llm=synth_llm(1024))
    recs = read_records(out)
    pyramids = {
        json.loads(line)["source_id"]: json.loads(line)
        for line in (out / "pyramids" / "part-00000-of-00001.jsonl").read_text().splitlines()
    }
    assert set(pyramids) == set(texts)
    assert recs and {r["source_id"] for r in recs} == set(texts)
    for r in recs:
        check_record(r, texts, pyramids, "scripted:test")
    assert len({r["id"] for r in recs}) == len(recs)
    assert pyramids["short.txt"]["levels"] == 1
    # the dataset on disk is the same records
    ds = load_dataset(out)
    assert len(ds) == len(recs) == stats["examples"]
    row = ds[0]
    assert validate_record(row) == [] and row == recs[0]
    # stats
    s = json.loads((out / "stats.json").read_text())
    assert s["documents"]["total"] == 6 and s["documents"]["with_examples"] == 3
    assert s["documents"]["skipped"] == {
        "empty_document": 1,
        "not_utf8_text": 1,
        "not_a_text_file": 1,
    }
    assert sum(s["level_histogram"].values()) == len(recs)
    assert sum(s["question_node_mix"].values()) == len(recs)
    assert set(s["llm"]["by_stage"]) == {"summary", "question", "answer"}
    for stage in s["llm"]["by_stage"].values():
        assert stage["calls"] > 0 and stage["prompt_tokens"] > 0
    leaves = s["chunks_per_document"]["pyramid_leaves"]
    assert leaves["min"] == 1 and leaves["total"] == sum(
        len([n for n in p["nodes"] if n["level"] == 0]) for p in pyramids.values()
    )
    assert 0 < s["llm"]["summary_calls_per_leaf"] <= 0.6
    assert s["questions"]["generated"] >= s["questions"]["kept"] == len(recs)
    assert s["seconds"]["wall"] > 0 and s["seconds"]["documents_per_hour"] > 0


def test_longalign_jsonl_source_bad_lines_and_duplicates(tmp_path):
    doc = "\n\n".join(topic_text(120, t) for t in ("harbor", "council"))
    lines = [
        json.dumps(
            {
                "messages": [
                    {"role": "user", "content": doc + "\n\nWhat happened?"},
                    {"role": "assistant", "content": "Things."},
                ]
            }
        ),
        "{not json",
        json.dumps({"messages": [{"role": "assistant", "content": "no user turn"}]}),
        json.dumps(
            {"messages": [{"role": "user", "content": doc + "\n\nWhat happened?"}]}
        ),  # duplicate
        json.dumps({"id": "empty-one", "messages": [{"role": "user", "content": ""}]}),
        json.dumps(["a", "list"]),
    ]
    src = tmp_path / "long.jsonl"
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    run_synth(cfg_for(src, out, questions_per_doc=1), llm=synth_llm(1024))
    s = json.loads((out / "stats.json").read_text())
    assert s["documents"]["skipped"] == {
        "bad_json_line": 2,
        "no_document_in_record": 1,
        "empty_document": 1,
    }
    assert s["documents"]["duplicates_in_source"] == 1 and s["documents"]["with_examples"] == 1
    recs = read_records(out)
    assert len(recs) == 1 and recs[0]["document"].startswith(doc[:50])
    assert validate_record(recs[0]) == []


def test_garbage_model_never_crashes_and_never_writes_bad_records(tmp_path):
    make_folder(tmp_path / "docs")
    out = tmp_path / "out"
    garbage = synth_llm(1024, summary=" ### 99 ###", question=" ?!", answer=" ")
    stats = run_synth(cfg_for(tmp_path / "docs", out), llm=garbage)
    assert stats["examples"] == 0 and read_records(out) == []
    assert stats["documents"]["skipped"]["no_valid_question"] == 3
    assert stats["questions"]["dropped"]["malformed"] > 0
    assert stats["repairs"]["summary_extractive_fallback"] > 0
    assert len(load_dataset(out)) == 0


def test_unanswerable_questions_are_dropped_as_no_answer(tmp_path):
    make_folder(tmp_path / "docs")
    out = tmp_path / "out"
    stats = run_synth(
        cfg_for(tmp_path / "docs", out), llm=synth_llm(1024, answer=" [NO INFORMATION]")
    )
    assert stats["examples"] == 0 and stats["questions"]["dropped"]["no_answer"] >= 3


def test_shards_split_documents_and_merge(tmp_path):
    make_folder(tmp_path / "docs")
    whole = tmp_path / "whole"
    run_synth(cfg_for(tmp_path / "docs", whole), llm=synth_llm(1024))
    out = tmp_path / "sharded"
    for i in range(2):
        assert not (out / "stats.json").exists()
        run_synth(cfg_for(tmp_path / "docs", out, num_shards=2, shard_index=i), llm=synth_llm(1024))
    parts = [read_records(out)]
    ids = [r["id"] for r in parts[0]]
    assert sorted(ids) == sorted(r["id"] for r in read_records(whole))
    merged = json.loads((out / "stats.json").read_text())
    assert merged["documents"]["total"] == 6 and merged["examples"] == len(ids)
    assert sorted(load_dataset(out)["id"]) == sorted(ids)


def test_rerun_with_other_settings_is_refused(tmp_path):
    make_folder(tmp_path / "docs")
    out = tmp_path / "out"
    run_synth(cfg_for(tmp_path / "docs", out, limit=1), llm=synth_llm(1024))
    with pytest.raises(BadInput, match="questions_per_doc"):
        run_synth(cfg_for(tmp_path / "docs", out, questions_per_doc=3), llm=synth_llm(1024))


def test_cli_synth_with_a_scripted_model(tmp_path, capsys):
    make_folder(tmp_path / "docs")
    out = tmp_path / "out"
    rc = main(
        [
            "synth",
            "--docs",
            str(tmp_path / "docs"),
            "--model",
            "scripted:echo",
            "--out",
            str(out),
            "--window",
            "1024",
            "--embedder",
            "hashing",
            "--no-progress",
            "--limit",
            "4",
        ]
    )
    assert rc == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["documents"]["total"] == 4
    for r in read_records(out):
        assert validate_record(r) == []
    assert (
        main(
            [
                "synth",
                "--docs",
                str(tmp_path / "nowhere"),
                "--model",
                "scripted:echo",
                "--out",
                str(out),
            ]
        )
        == 2
    )


def test_answers_without_any_finding_are_dropped_as_no_evidence(tmp_path):
    import re

    make_folder(tmp_path / "docs")
    out = tmp_path / "out"
    llm = synth_llm(1024, answer=" [NO INFORMATION]")  # every map call finds nothing ...
    llm._compiled.insert(
        0, (re.compile(r"No part of the document.*Answer:$", re.S), lambda m: " forty two")
    )
    stats = run_synth(cfg_for(tmp_path / "docs", out), llm=llm)  # ... yet reduce answers
    assert stats["examples"] == 0 and stats["questions"]["dropped"]["no_evidence"] >= 3


def test_dataset_source_with_text_column_and_push_to_hub(tmp_path, monkeypatch):
    import datasets

    texts = ["\n\n".join(topic_text(120, t, i) for t in ("harbor", "council")) for i in range(2)]
    src = tmp_path / "ds"
    datasets.Dataset.from_dict({"id": ["a", "b"], "body": texts}).save_to_disk(str(src))
    with pytest.raises(BadInput, match="no text column"):
        run_synth(cfg_for(src, tmp_path / "bad"), llm=synth_llm(1024))
    pushed = []
    monkeypatch.setattr(
        datasets.Dataset, "push_to_hub", lambda self, name, **kw: pushed.append((name, len(self)))
    )
    out = tmp_path / "out"
    stats = run_synth(
        cfg_for(src, out, text_column="body", push_to_hub="me/pyramid-align"), llm=synth_llm(1024)
    )
    assert {r["source_id"] for r in read_records(out)} == {"a", "b"}
    assert pushed == [("me/pyramid-align", stats["examples"])]


def test_missing_hub_dataset_is_one_clear_error(tmp_path, monkeypatch):
    import datasets

    def offline(*a, **kw):
        raise ConnectionError("no network")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(BadInput, match="cannot load the hub dataset"):
        run_synth(cfg_for("someone/some-dataset", tmp_path / "out"), llm=synth_llm(1024))


def test_concurrent_documents_share_batches(tmp_path):
    from chunkwise.llm.scripted import ScriptedLLM

    docs = tmp_path / "docs"
    docs.mkdir()
    for name, topic in (("a.txt", "harbor"), ("b.txt", "orchard")):
        (docs / name).write_text("\n\n".join(topic_text(120, topic, i) for i in range(4)))

    sizes: list[list[tuple[bool, bool]]] = []

    class Recording(ScriptedLLM):
        def _generate(self, requests):
            sizes.append([("harbor" in r.prompt, "orchard" in r.prompt) for r in requests])
            return super()._generate(requests)

    llm = synth_llm(1024)
    rec = Recording(rules=[(p.pattern, r) for p, r in llm._compiled], window=1024)
    run_synth(cfg_for(docs, tmp_path / "out", concurrency=2), llm=rec)
    mixed = [call for call in sizes if any(h for h, _ in call) and any(o for _, o in call)]
    assert mixed, "no batch held requests of both documents"
