"""Synthesis with the real embedded model (hf:default) and the real MiniLM embedder on two
short documents (Python's own reference text, shipped with the interpreter)."""

from __future__ import annotations

import json

import pytest

from chunkwise.synth import SynthConfig, load_dataset, run_synth, validate_record


@pytest.mark.slow
def test_hf_default_two_short_documents(tmp_path, embedded_llm):
    import pydoc_data.topics as topics

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "loops.txt").write_text("\n\n".join(topics.topics[k] for k in ("while", "for")))
    (docs / "try.txt").write_text(topics.topics["try"][:3000])
    out = tmp_path / "out"
    cfg = SynthConfig(
        docs=str(docs),
        out=str(out),
        model="hf:default",
        window=1024,
        questions_per_doc=1,
        concurrency=2,
        progress=False,
    )
    stats = run_synth(cfg, llm=embedded_llm)

    assert stats["documents"]["total"] == 2 and stats["documents"]["pyramids_built"] == 2
    assert stats["examples"] >= 1
    records = [
        json.loads(x) for x in (out / "data" / "part-00000-of-00001.jsonl").read_text().splitlines()
    ]
    assert len(records) == stats["examples"] == len(load_dataset(out))
    for r in records:
        assert validate_record(r) == []
        assert r["meta"]["model"] == "hf:default" and r["meta"]["prompt_version"] == "synth-base-1"
    pyramids = [
        json.loads(x)
        for x in (out / "pyramids" / "part-00000-of-00001.jsonl").read_text().splitlines()
    ]
    for p in pyramids:
        assert p["levels"] >= 2  # both documents are several leaves long at this window
        for node in p["nodes"]:
            assert node["text"].strip() and node["sentences"]
    by_stage = stats["llm"]["by_stage"]
    assert by_stage["summary"]["calls"] >= 2 and "importance" not in by_stage  # centrality: no LLM
    assert stats["llm"]["summary_calls_per_leaf"] <= 0.6
