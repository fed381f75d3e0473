"""Synthesis with the real embedded model (hf:default) and the real MiniLM embedder on two
short documents (Python's own reference text, shipped with the interpreter), interrupted after
its first batch and resumed from the calls that batch kept."""

from __future__ import annotations

import json

import pytest

from chunkwise.synth import SynthConfig, load_dataset, run_synth, validate_record


class DiesAtBatch:
    """``inner``, interrupted (as a kill would) at its ``at``-th batch, which no one gets."""

    def __init__(self, inner, at: int):
        self.inner, self.at, self.sent = inner, at, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def generate(self, requests):
        if len(self.sent) + 1 == self.at:
            raise KeyboardInterrupt
        out = self.inner.generate(requests)
        self.sent.append(len(requests))
        return out


@pytest.mark.slow
def test_hf_default_two_short_documents_killed_and_resumed(tmp_path, embedded_llm):
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
    # the first batch (leaf summaries) finishes no document: its calls are kept, and the rerun
    # replays them
    first = DiesAtBatch(embedded_llm, at=2)
    with pytest.raises(KeyboardInterrupt):
        run_synth(cfg, llm=first)
    assert len(first.sent) == 1 and list((out / "work" / "calls").glob("doc-*.jsonl"))
    second = DiesAtBatch(embedded_llm, at=0)
    stats = run_synth(cfg, llm=second)
    runs = (out / "work" / "runs-part-00000-of-00001.jsonl").read_text().splitlines()
    calls = json.loads(runs[-1])["calls"]
    assert calls["replayed"] >= first.sent[0] and calls["computed"] == sum(second.sent)
    assert not (out / "work" / "calls").exists()

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
