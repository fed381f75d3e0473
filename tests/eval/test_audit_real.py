"""The evidence audit on real runs of the embedded model (hf:default, loaded once per session):
standard decoding with a window shorter than the document (``evidence_truncated`` exactly for the
examples whose evidence is not in the logged prompt), a small MapReduce run through
``chunkwise eval --audit`` whose funnel adds up to n, and Chain-of-Agents and retrieval runs
whose per-prediction facts (the step that read the evidence, what its memory kept; whether
the answer call's prompt held it) are checked against the trace and prompt themselves."""

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


def spans_overlap(span, spans):
    return any(s < span[1] and span[0] < e for s, e in spans)


def texts_of(r, context):
    return [context[r["id"]][s:e] for s, e in r["audit"]["evidence"]["spans"]]


def gold_of(r):
    gt = r["ground_truth"]
    gt = gt.get("answer", gt) if isinstance(gt, dict) else gt
    return gt[0] if isinstance(gt, list) else gt


def contexts(llm, data, limit, task="passkey"):
    bench = get_benchmark("infinitebench")
    loaded = bench.load(task, bench.parse_data(data), limit=limit, revision=None, seed=0,
                        count_tokens=llm.count_tokens)  # fmt: skip
    return {ex["id"]: ex["context"] for ex in loaded.examples}


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
    context = contexts(embedded_llm, "synthetic:1200", 4)
    recs = lines(out / "predictions/passkey.jsonl")
    missing = []
    for r in recs:
        assert r["stats"]["document_truncated"]  # the window is shorter than every document
        in_prompt = all(t in r["prompt"] for t in texts_of(r, context))
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
                    if spans_overlap(m["output"]["span"], a["evidence"]["spans"])]  # fmt: skip
            assert a["holders"] == held


@pytest.mark.slow
def test_chain_of_agents_audit_follows_the_memory_of_the_step_that_read_the_evidence(
    embedded_llm, tmp_path
):
    out = tmp_path / "coa"
    cfg = EvalConfig(model="hf:default", strategy="chain_of_agents", tasks=["passkey"],
                     data="synthetic:1200", limit=3, strategy_args={"chunk_tokens": 300},
                     audit=True, output=str(out))  # fmt: skip
    res = run_eval(cfg, llm=embedded_llm, progress=False)
    context = contexts(embedded_llm, "synthetic:1200", 3)
    recs = lines(out / "predictions/passkey.jsonl")
    gold = {r["id"]: str(gold_of(r)) for r in recs}
    for r in recs:
        a = r["audit"]
        assert a["outcome"] in OUTCOMES and a["outcome"] != "unknown", a
        workers = [e for e in r["trace"] if e["stage"] == "worker"]
        assert len(workers) >= 3  # several steps, so "which step" means something
        held = [i + 1 for i, w in enumerate(workers)
                if spans_overlap(w["output"]["span"], a["evidence"]["spans"])]  # fmt: skip
        assert a["holder_steps"] == held and len(held) == 1
        assert all(t in context[r["id"]] for t in texts_of(r, context))
        kept = gold[r["id"]] in workers[held[0] - 1]["output"]["memory"]
        if not kept:
            assert a["outcome"] == "not_extracted"
        elif a["outcome"] != "correct":
            final = gold[r["id"]] in workers[-1]["output"]["memory"]
            assert a["outcome"] == ("wrong_despite_evidence" if final else "lost_in_memory"), a
    block = res["audit"]["passkey"]
    assert sum(block["funnel"].values()) == block["n"] == 3


@pytest.mark.slow
def test_retrieval_audit_is_whether_the_answer_prompt_holds_the_evidence(embedded_llm, tmp_path):
    """Two short retrieved chunks: a pass key's needle line stands out from its filler and is
    retrieved; a key-value pair among hundreds of look-alike uuid pairs is not (all-MiniLM)."""
    out = tmp_path / "ret"
    tasks = ["passkey", "kv_retrieval"]
    cfg = EvalConfig(model="hf:default", strategy="retrieval", tasks=tasks,
                     data="synthetic:1200", limit=3, log_samples=True, audit=True,
                     strategy_args={"chunk_tokens": 60, "top_k": 2, "max_context_tokens": 120},
                     output=str(out))  # fmt: skip
    res = run_eval(cfg, llm=embedded_llm, progress=False)
    seen = set()
    for task in tasks:
        context = contexts(embedded_llm, "synthetic:1200", 3, task)
        for r in lines(out / f"predictions/{task}.jsonl"):
            a = r["audit"]
            in_prompt = all(t in r["prompt"] for t in texts_of(r, context))
            assert a["leaf_in_context"] is in_prompt
            assert (a["outcome"] == "evidence_not_retrieved") is (not a["retrieved"]), a
            assert a["outcome"] != "unknown"
            # the prompt is a few short chunks, far shorter than the document
            assert len(r["prompt"]) < len(context[r["id"]]) / 3
            seen.add(a["outcome"] == "evidence_not_retrieved")
        block = res["audit"][task]
        assert sum(block["funnel"].values()) == block["n"] == 3
    assert seen == {True, False}  # the audit is tested both ways
