"""The evidence audit through real strategies and `chunkwise eval --audit` on the scripted model:
the trace fields it reads, no model call added, saved runs audited on a rerun, funnels in
results.json, `chunkwise compare` and wandb (an offline run)."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pytest

from chunkwise import cli
from chunkwise.data.synthetic import generate, passkey_query
from chunkwise.eval.audit import OUTCOMES
from chunkwise.eval.runner import EvalConfig, run_eval
from chunkwise.eval.wandb_log import metrics_of
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.strategies import get_strategy

FOUND = (
    r"pass key is (\d+)\. Remember",
    r"Extracted Information: The pass key is \1.\nRationale: stated.\nAnswer: \1\n"
    r"Confidence Score: 1",
)
EMPTY = (
    r"Question",
    "Extracted Information: nothing\nRationale: none\nAnswer: [NO INFORMATION]\n"
    "Confidence Score: 0",
)


def lines(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def mr_llm(rules=(FOUND, EMPTY)):
    return ScriptedLLM(rules=list(rules), window=1200)


@pytest.fixture(scope="module")
def doc():
    return generate("passkey", length_tokens=3000, n=1, seed=1, count_tokens=mr_llm().count_tokens)[
        0
    ]


def test_map_events_carry_their_chunk_span_and_the_floor_names_its_drop(doc):
    llm = mr_llm()
    s = get_strategy("mapreduce", prompts="chat", min_confidence="3", keep_when_all_low=0,
                     max_new_tokens=100)  # fmt: skip
    ans = s.answer(doc["context"], passkey_query(doc), llm)
    maps = [e.output for e in ans.trace if e.stage == "map"]
    assert len(maps) >= 3
    spans = [m["span"] for m in maps]
    assert spans[0][0] == 0 and spans[-1][1] <= len(doc["context"])
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))  # in order, not overlapping
    key = doc["answer"][0]
    holder = [m for m in maps if m["span"][0] <= doc["context"].index(key) < m["span"][1]]
    assert holder[0]["answer"] == key and holder[0]["dropped"] == "confidence_floor"
    assert all("dropped" not in m for m in maps if m is not holder[0])
    # the same run with the floor off drops nothing
    s0 = get_strategy("mapreduce", prompts="chat", min_confidence="0", max_new_tokens=100)
    assert not any(
        "dropped" in e.output for e in s0.answer(doc["context"], passkey_query(doc), llm).trace
    )


def test_grounding_names_its_drop(doc):
    made_up = (FOUND[0], FOUND[1].replace(r"Answer: \1", "Answer: 99999"))
    s = get_strategy("mapreduce", prompts="chat", grounding=True, max_new_tokens=100)
    ans = s.answer(doc["context"], passkey_query(doc), mr_llm((made_up, EMPTY)))
    dropped = [e.output.get("dropped") for e in ans.trace if e.stage == "map"]
    assert dropped.count("ungrounded") == 1, dropped


def test_worker_events_carry_their_chunk_span(doc):
    llm = ScriptedLLM(rules=[(r"pass key is (\d+)", r"key \1")], default="nothing", window=1200)
    ans = get_strategy("chain_of_agents").answer(doc["context"], passkey_query(doc), llm)
    spans = [e.output["span"] for e in ans.trace if e.stage == "worker"]
    assert len(spans) >= 2 and spans[0][0] == 0 and spans[-1][1] >= len(doc["context"]) - 1
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))


def passkey_llm(window=300):
    return ScriptedLLM(rules=[(r"pass key is (\d+)", r"\1")], default="I don't know.",
                       window=window)  # fmt: skip


def cfg(out, **kw):
    base = dict(model="scripted:passkey", tasks=["passkey"], data="synthetic:600", limit=5,
                output=str(out))  # fmt: skip
    return EvalConfig(**{**base, **kw})


def test_audit_adds_no_model_call_and_funnels_add_up(tmp_path):
    plain, audited = passkey_llm(), passkey_llm()
    run_eval(cfg(tmp_path / "a"), llm=plain, progress=False)
    res = run_eval(cfg(tmp_path / "b", audit=True, save_trace=False), llm=audited, progress=False)
    # (documents whose key the window cuts are the same prompt: the run asks it once)
    assert len(audited.calls) == len(plain.calls) <= 5
    block = res["audit"]["passkey"]
    assert block["n"] == 5 and sum(block["funnel"].values()) == 5
    assert set(block["funnel"]) == set(OUTCOMES)
    recs = lines(tmp_path / "b/predictions/passkey.jsonl")
    assert all("trace" not in r for r in recs)  # audited from the trace kept in memory
    truncated = [r["id"] for r in recs if r["audit"]["outcome"] == "evidence_truncated"]
    assert block["funnel"]["evidence_truncated"] == len(truncated) >= 1
    assert block["funnel"]["correct"] == sum(r["prediction"] == r["ground_truth"] for r in recs)
    assert "audit" not in json.loads((tmp_path / "a/results.json").read_text())


def test_rerun_with_audit_audits_saved_lines_without_a_model_call(tmp_path):
    first = passkey_llm()
    run_eval(cfg(tmp_path / "r"), llm=first, progress=False)
    assert not any("audit" in r for r in lines(tmp_path / "r/predictions/passkey.jsonl"))
    again = passkey_llm()
    res = run_eval(cfg(tmp_path / "r", audit=True), llm=again, progress=False)
    assert again.calls == []  # every example was answered: nothing is asked again
    recs = lines(tmp_path / "r/predictions/passkey.jsonl")
    assert all(r["audit"]["checked_by"] == "kept_spans" for r in recs)
    assert sum(res["audit"]["passkey"]["funnel"].values()) == 5
    # the same outcomes as auditing while answering (from the prompts in memory)
    live = run_eval(cfg(tmp_path / "live", audit=True), llm=passkey_llm(), progress=False)
    assert live["audit"] == res["audit"]


def test_compare_shows_funnels_side_by_side(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "COMMANDS", {"eval": "evaluate", "compare": "compare"})
    run_eval(cfg(tmp_path / "std", audit=True), llm=passkey_llm(), progress=False)
    run_eval(cfg(tmp_path / "wide", audit=True), llm=passkey_llm(5000), progress=False)
    run_eval(cfg(tmp_path / "plain"), llm=passkey_llm(), progress=False)
    png, js = tmp_path / "f.png", tmp_path / "t.json"
    args = ["compare", str(tmp_path / "std"), str(tmp_path / "wide"), str(tmp_path / "plain"),
            "--funnel-plot", str(png), "--json", str(js)]  # fmt: skip
    assert cli.main(args) == 0
    text = capsys.readouterr().out
    assert "Evidence audit, passkey:" in text and "| outcome | std | wide |" in text
    assert "No audit (run without --audit): plain." in text
    assert png.stat().st_size > 5000
    funnels = json.loads(js.read_text())["funnels"]["tasks"]["passkey"]
    assert funnels["wide"]["funnel"]["correct"] == 5  # the whole document fits
    assert funnels["std"]["funnel"]["evidence_truncated"] >= 1


def test_wandb_logs_the_funnel(tmp_path, monkeypatch):
    res = run_eval(cfg(tmp_path / "m", audit=True), llm=passkey_llm(), progress=False)
    m = metrics_of(res)
    assert sum(m[f"eval/passkey/audit/{o}"] for o in OUTCOMES) == 5
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    for key in ("WANDB_API_KEY", "WANDB_BASE_URL", "WANDB_DIR"):
        monkeypatch.delenv(key, raising=False)
    out = tmp_path / "w"
    run_eval(cfg(out, audit=True, wandb=True), llm=passkey_llm(), progress=False)
    assert os.environ["WANDB_MODE"] == "offline"
    (run,) = list((out / "wandb").glob("offline-run-*"))
    log = next(run.glob("run-*.wandb")).read_bytes()
    assert b"eval/passkey/audit/evidence_truncated" in log
    (table,) = list(run.glob("files/media/table/eval/audit_funnel_*.table.json"))
    data = json.loads(table.read_text())
    assert data["columns"] == ["task", "outcome", "count", "share"]
    assert sum(row[2] for row in data["data"]) == 5


def test_chain_of_agents_run_is_audited_from_its_own_trace(tmp_path):
    # a worker writes the key down when its chunk holds it, and otherwise overwrites the
    # memory with something else (chat prompts: rewrite mode, each worker replaces the
    # memory): the key survives only when its chunk is read last
    rules = [
        (r"These are the final notes:.*Key noted: (\d+)", r"\1"),  # the manager reads the notes
        (r"pass key is (\d+)\. Remember", r"Key noted: \1."),  # a worker whose part holds it
    ]
    llm = ScriptedLLM(rules=rules, default="Notes about the weather.", window=900)
    res = run_eval(
        cfg(
            tmp_path / "coa",
            strategy="chain_of_agents",
            data="synthetic:2000",
            limit=4,
            audit=True,
            strategy_args={"prompts": "chat", "memory_tokens": "64"},
        ),
        llm=llm,
        progress=False,
    )
    recs = lines(tmp_path / "coa/predictions/passkey.jsonl")
    outcomes = []
    for r in recs:
        a = r["audit"]
        steps = [e["round"] for e in r["trace"] if e["stage"] == "worker"]
        assert len(steps) >= 2 and len(a["holder_steps"]) == 1, a
        assert a["extracted_at"] == a["holder_steps"][0]
        last = a["holder_steps"][0] == steps[-1]
        assert a["outcome"] == ("correct" if last else "lost_in_memory"), a
        outcomes.append(a["outcome"])
    assert set(outcomes) == {"correct", "lost_in_memory"}  # both paths occur
    assert sum(res["audit"]["passkey"]["funnel"].values()) == 4


@pytest.mark.slow
def test_retrieval_run_is_audited_from_its_answer_prompt(tmp_path):
    llm = ScriptedLLM(rules=[(r"pass key is (\d+)", r"\1")], default="none", window=600)
    res = run_eval(
        cfg(tmp_path / "rt", strategy="retrieval", data="synthetic:2000", limit=2, audit=True,
            strategy_args={"top_k": "1"}),
        llm=llm,
        progress=False,
    )  # fmt: skip
    recs = lines(tmp_path / "rt/predictions/passkey.jsonl")
    for r in recs:
        a = r["audit"]
        key = r["ground_truth"]
        assert a["retrieved"] is (str(key) in r["prediction"]), a  # the answer copies the context
        assert a["outcome"] == ("correct" if a["retrieved"] else "evidence_not_retrieved")
    assert sum(res["audit"]["passkey"]["funnel"].values()) == 2


@pytest.mark.parametrize(
    "audit",
    [
        {"passkey": {"n": 2, "funnel": {"correct": 1}}},  # does not add up to n
        {"passkey": {"n": 1, "funnel": {"correct": "1"}}},
        {"passkey": {"n": 1, "funnel": {"lost": 1}}},
        {"passkey": []},
    ],
)
def test_compare_refuses_a_broken_funnel(tmp_path, audit):
    from chunkwise.errors import BadInput
    from chunkwise.eval.funnels import load_funnels

    (tmp_path / "results.json").write_text(json.dumps({"audit": audit}))
    with pytest.raises(BadInput, match=r"results.json: audit.passkey"):
        load_funnels([tmp_path], ["r"])
