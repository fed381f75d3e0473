"""The evidence audit on real runs of the embedded model (hf:default, loaded once per session):
standard decoding with a window shorter than the document (``evidence_truncated`` exactly for the
examples whose evidence is not in the logged prompt), and a small MapReduce run through
``chunkwise eval --audit`` whose funnel adds up to n."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chunkwise import cli
from chunkwise.benchmarks import get_benchmark
from chunkwise.eval.audit import OUTCOMES
from chunkwise.eval.runner import EvalConfig, run_eval


def lines(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


class Shared:
    """The session's loaded model, handed to ``chunkwise eval`` without being closed by it."""

    def __init__(self, llm):
        self._llm = llm

    def __getattr__(self, name):
        return getattr(self._llm, name)

    def close(self):
        pass


@pytest.mark.slow
def test_standard_evidence_truncated_exactly_where_the_prompt_lacks_it(embedded_llm, tmp_path):
    out = tmp_path / "std"
    cfg = EvalConfig(
        model="hf:default",
        strategy="standard",
        tasks=["passkey"],
        data="synthetic:1200",
        limit=4,
        context_window=700,
        log_samples=True,
        audit=True,
        output=str(out),
    )
    res = run_eval(cfg, llm=embedded_llm, progress=False)
    bench = get_benchmark("infinitebench")
    data = bench.load(
        "passkey", bench.parse_data("synthetic:1200"), limit=4, revision=None, seed=0,
        count_tokens=embedded_llm.count_tokens,
    )  # fmt: skip
    context = {ex["id"]: ex["context"] for ex in data.examples}
    recs = lines(out / "predictions/passkey.jsonl")
    missing = []
    for r in recs:
        assert r["stats"]["document_truncated"]  # the window is shorter than every document
        spans = r["audit"]["evidence"]["spans"]
        text = [context[r["id"]][s:e] for s, e in spans]
        in_prompt = all(t in r["prompt"] for t in text)
        assert r["audit"]["in_prompt"] is in_prompt
        if not in_prompt:
            missing.append(r["id"])
            assert r["audit"]["outcome"] == "evidence_truncated", r  # a pass key is not guessed
        else:
            assert r["audit"]["outcome"] in ("correct", "wrong_despite_evidence")
    assert 0 < len(missing) < len(recs)  # both kinds occur: the audit is tested both ways
    funnel = res["audit"]["passkey"]["funnel"]
    assert funnel["evidence_truncated"] == len(missing)
    assert sum(funnel.values()) == res["audit"]["passkey"]["n"] == 4


@pytest.mark.slow
def test_mapreduce_eval_audit_funnel_adds_up(embedded_llm, tmp_path, monkeypatch, capsys):
    import chunkwise.llm

    monkeypatch.setattr(cli, "COMMANDS", {"eval": "evaluate", "compare": "compare"})
    monkeypatch.setattr(chunkwise.llm, "load_llm", lambda spec: Shared(embedded_llm))
    out = tmp_path / "mr"
    args = ["eval", "--model", "hf:default", "--strategy", "mapreduce", "--tasks",
            "passkey", "--data", "synthetic:800", "--limit", "2",
            "--strategy-args", "chunk_tokens=400,max_new_tokens=12", "--output", str(out), "--no-progress",
            "--audit"]  # fmt: skip
    assert cli.main(args) == 0
    res = json.loads((out / "results.json").read_text())
    for task in ("passkey",):
        block = res["audit"][task]
        assert block["n"] == 2 and sum(block["funnel"].values()) == 2
        recs = lines(out / f"predictions/{task}.jsonl")
        assert all(r["audit"]["outcome"] in OUTCOMES for r in recs)
        print(task, {o: c for o, c in block["funnel"].items() if c})
        for r in recs:
            a = r["audit"]
            assert a["outcome"] != "unknown", a  # located evidence, traces with chunk spans
            maps = [e for e in r["trace"] if e["stage"] == "map"]
            assert len(maps) >= 2 and a["holders"]
            held = [m["inputs"][0] for m in maps
                    if any(s < m["output"]["span"][1] and m["output"]["span"][0] < e
                           for s, e in a["evidence"]["spans"])]  # fmt: skip
            assert a["holders"] == held
