"""`chunkwise eval --plan`: the counts it prints against what a real run on the same data
counted (its stats and trace), exact where the strategy is deterministic in its calls."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from chunkwise.errors import BadInput, LLMRequestError
from chunkwise.eval.config import EvalConfig
from chunkwise.eval.plan import DryRunLLM, parse_rates, plan_eval, probe_rates, to_text
from chunkwise.eval.runner import run_eval
from chunkwise.llm import GenerationParams, Request, load_llm


def _cfg(tmp_path, name, **kw):
    base = dict(
        model="scripted:passkey",
        benchmark="infinitebench",
        tasks=["passkey", "number_string"],
        data="synthetic:1K",
        limit=3,
        output=str(tmp_path / name),
    )
    base.update(kw)
    return EvalConfig(**base)


def _real(cfg):
    """The real run's totals and per-stage counts, from its predictions' stats and traces."""
    results = run_eval(cfg, progress=False)
    out = {}
    for task in cfg.tasks:
        text = (Path(cfg.output) / "predictions" / f"{task}.jsonl").read_text(encoding="utf-8")
        lines = [json.loads(x) for x in text.splitlines() if x.strip()]
        stages: dict[str, list[int]] = {}
        for rec in lines:
            for e in rec["trace"]:
                s = stages.setdefault(e["stage"], [0, 0, 0])
                s[0] += 1
                s[1] += e["prompt_tokens"]
                s[2] += e["completion_tokens"]
        out[task] = {"stats": results["strategy_stats"][task], "stages": stages, "n": len(lines)}
    return out


def _plan(cfg, **kw):
    with load_llm(cfg.model) as llm:
        return plan_eval(cfg, llm, progress=False, **kw)


def test_standard_plan_is_exact_in_calls_and_prefill(tmp_path):
    cfg = _cfg(tmp_path, "std", context_window=700)  # documents are cut to the window
    plan = _plan(cfg)
    real = _real(cfg)
    for task in cfg.tasks:
        p, r = plan["tasks"][task], real[task]
        assert p["examples"] == r["n"] == 3
        assert p["calls"] == r["stats"]["llm_calls"] == 3
        assert p["prefill_tokens"] == r["stats"]["prompt_tokens"]
        assert p["stages"]["generate"]["exact"] == ["calls", "prefill"]
        # replies at their whole budget: an upper bound of what was decoded
        assert p["decode_tokens"] >= r["stats"]["completion_tokens"]
    assert plan["total"]["prefill_tokens"] == sum(
        real[t]["stats"]["prompt_tokens"] for t in cfg.tasks
    )


def test_mapreduce_plan_is_exact_for_the_map_wave(tmp_path):
    cfg = _cfg(tmp_path, "mr", strategy="mapreduce", context_window=400)
    plan = _plan(cfg)
    real = _real(cfg)
    for task in cfg.tasks:
        p, r = plan["tasks"][task], real[task]
        calls, prefill, _ = r["stages"]["map"]
        assert calls > 2 * r["n"]  # several chunks per document
        assert p["stages"]["map"]["calls"] == calls
        assert p["stages"]["map"]["prefill_tokens"] == prefill
        assert p["stages"]["map"]["exact"] == ["calls", "prefill"]
        assert p["stages"]["reduce"]["calls"] == r["stages"]["reduce"][0] == 3
        assert p["stages"]["reduce"]["exact"] == []  # its prompt holds the map replies
        assert p["calls"] == r["stats"]["llm_calls"]  # no collapse at this size, either way


def test_the_plan_counts_the_calls_a_run_computes_as_the_run_does(tmp_path):
    """InfiniteBench's passkey documents repeat one filler text: many map calls are the same
    call, which a run computes once (chunkwise.llm.call_cache). The plan's computed calls are
    the run's: the map repeats exactly, and every reduce call counts (its prompt holds the
    replies; here each document's holds its own pass key)."""
    cfg = _cfg(tmp_path, "rep", strategy="mapreduce", context_window=400, limit=4,
               tasks=["passkey"])  # fmt: skip
    plan = _plan(cfg)
    run = run_eval(dataclasses.replace(cfg, output=str(tmp_path / "rep-run")), progress=False)
    computed = plan["total"]["computed"]
    assert computed["calls"] == run["timing"]["calls"]["computed"]
    assert computed["calls"] < plan["total"]["calls"]  # the filler chunks repeat
    for t in plan["tasks"].values():
        assert t["computed"]["calls"] >= t["stages"]["reduce"]["calls"] + t["examples"]
        assert t["computed"]["prefill_tokens"] < t["prefill_tokens"]
    assert sum(t["computed"]["calls"] for t in plan["tasks"].values()) == computed["calls"]
    assert "the model computes" in to_text(plan)


def test_mapreduces_checks_do_not_drop_the_plans_stand_in_findings(tmp_path):
    """hf:default-mr decodes with grounding, anchor_quotes and a confidence floor. Those would
    drop every filler reply of the plan's stand-in (not a quote, no score), so each reduce was
    planned as if the map had found nothing, and every document's reduce as the same call
    (counted once). The plan keeps every finding instead: with the checks on it plans what it
    plans with them off, while the run's own strategy keeps its checks."""
    plans = []
    checks = {"grounding": "true", "anchor_quotes": "true", "min_confidence": "4"}
    for name, args in (("plain", {}), ("checked", checks)):
        cfg = _cfg(tmp_path, name, strategy="mapreduce", context_window=2000, data="synthetic:4K",
                   tasks=["passkey"], strategy_args={"prompts": "chat", **args})  # fmt: skip
        plans.append(_plan(cfg)["tasks"]["passkey"])
    plain, checked = plans
    assert checked["stages"] == plain["stages"] and checked["computed"] == plain["computed"]
    reduce, maps = checked["stages"]["reduce"], checked["stages"]["map"]
    assert reduce["prefill_tokens"] > maps["decode_tokens"]  # every map reply reaches it
    assert checked["computed"]["calls"] >= reduce["calls"] + 1  # each document's own reduce

    from chunkwise.strategies.mapreduce import MapReduce

    mr = MapReduce(grounding=True, anchor_quotes=True, snap_quotes=True, min_confidence="4")
    twin = mr.for_planning()
    assert (twin.grounding, twin.anchor_quotes, twin.echo_check, twin.min_confidence) == (
        False, False, False, "0")  # fmt: skip
    assert (mr.grounding, mr.anchor_quotes, mr.echo_check, mr.min_confidence) == (
        True, True, True, "4")  # fmt: skip


class _Dies:
    """``llm``, gone (as a killed backend) after ``alive`` generate calls."""

    def __init__(self, llm, alive: int):
        self._llm, self.alive = llm, alive

    def __getattr__(self, name):
        return getattr(self._llm, name)

    def generate(self, requests):
        if self.alive == 0:
            raise LLMRequestError("the backend went away")
        self.alive -= 1
        return self._llm.generate(requests)

    def close(self):
        pass


def test_a_stopped_run_is_planned_for_what_is_left(tmp_path, monkeypatch):
    """--plan on the folder of a run stopped partway: answered examples are left out and the
    calls the folder keeps are replayed, so the plan's computed calls are the rerun's."""
    from chunkwise.llm import call_cache, scripted

    monkeypatch.setattr(call_cache, "PIECE_CALLS", 3)
    cfg = _cfg(tmp_path, "stopped", strategy="mapreduce", context_window=400, limit=4,
               tasks=["passkey"])  # fmt: skip
    fresh = _plan(cfg)
    with pytest.raises(LLMRequestError):
        run_eval(cfg, llm=_Dies(scripted.SCRIPTS["passkey"](), alive=3), progress=False)
    answered = (Path(cfg.output) / "predictions" / "passkey.jsonl").read_text()
    done = len(answered.splitlines())
    assert 0 < done < 4  # stopped partway
    left = _plan(cfg)
    assert left["resumes"] == cfg.output and left["total"]["done"] == done
    assert left["total"]["examples"] == 4 - done and left["total"]["kept"] > 0
    assert left["total"]["computed"]["calls"] < fresh["total"]["computed"]["calls"]
    assert "what is left of the run in" in to_text(left)
    calls = Path(cfg.output) / "calls" / "rank0.jsonl"
    text = calls.read_text()
    calls.write_text("{not json\n" + text)  # a line the rerun would refuse: so does the plan
    with pytest.raises(BadInput, match=r"rank0.jsonl:1: not valid JSON"):
        _plan(cfg)
    calls.write_text(text)
    rerun = run_eval(cfg, progress=False)
    assert left["total"]["computed"]["calls"] == rerun["timing"]["calls"]["computed"]

    # a folder of another config is not read: the plan is of a new run, and says why
    other = _plan(dataclasses.replace(cfg, context_window=500))
    assert other["resumes"] is None and other["total"]["done"] == 0
    assert "planned as a new run" in to_text(other) and "different config" in other["refused"]


def test_what_is_left_is_timed_at_the_pace_the_folder_kept(tmp_path, monkeypatch, capsys):
    """--plan-rates kept: the stopped run's kept calls took 7 s a piece by the clock, so the
    rest is timed at their prompt tokens over that time; a folder that keeps none says so."""
    from chunkwise.cli import main
    from chunkwise.llm import call_cache, scripted

    class Clock:  # each read moves 7 s: read before and after a piece, it took 7 s
        now = 0.0

        def __call__(self) -> float:
            Clock.now += 7.0
            return Clock.now

    monkeypatch.setattr(call_cache, "PIECE_CALLS", 3)
    monkeypatch.setattr(call_cache, "_clock", Clock())
    cfg = _cfg(tmp_path, "paced", strategy="mapreduce", context_window=400, limit=4,
               tasks=["passkey"])  # fmt: skip
    args = ["eval", "--model", "scripted:passkey", "--benchmark", "infinitebench", "--tasks",
            "passkey", "--data", "synthetic:1K", "--limit", "4", "--strategy", "mapreduce",
            "--context-window", "400", "--output", cfg.output, "--plan", "--no-progress"]  # fmt: skip
    assert main([*args, "--plan-rates", "kept"]) == 2  # nothing ran yet: one line says so
    assert "--plan-rates kept: --output keeps no timed calls" in capsys.readouterr().err
    with pytest.raises(LLMRequestError):
        run_eval(cfg, llm=_Dies(scripted.SCRIPTS["passkey"](), alive=3), progress=False)
    kept = [json.loads(x) for x in (Path(cfg.output) / "calls" / "rank0.jsonl").open()]
    prompt = sum(x["completion"]["prompt_tokens"] for x in kept)
    pieces = len({x["piece"]["n"] for x in kept})
    assert pieces >= 2

    capsys.readouterr()
    assert main([*args, "--plan-rates", "kept"]) == 0
    text = capsys.readouterr().out
    plan = json.loads(text.strip().splitlines()[-1])
    assert plan["rates"]["kept"]["seconds"] == 7.0 * pieces
    assert plan["rates"]["prefill"] == pytest.approx(prompt / (7.0 * pieces), abs=0.05)
    left = plan["total"]["computed"]["prefill_tokens"]
    assert left > 0 and plan["estimated_seconds"] == pytest.approx(
        left * 7.0 * pieces / prompt, abs=0.1
    )
    assert f"time at the pace of the {len(kept)} calls kept in the run folder" in text


def test_chain_of_agents_plan_counts_one_worker_per_chunk_and_a_manager(tmp_path):
    cfg = _cfg(tmp_path, "coa", strategy="chain_of_agents", context_window=400)
    plan = _plan(cfg)
    real = _real(cfg)
    for task in cfg.tasks:
        p, r = plan["tasks"][task], real[task]
        assert p["stages"]["worker"]["calls"] == r["stages"]["worker"][0] > r["n"]
        assert p["stages"]["manager"]["calls"] == r["stages"]["manager"][0] == 3
        assert p["stages"]["worker"]["exact"] == ["calls"]
        assert p["calls"] == r["stats"]["llm_calls"]


@pytest.mark.slow
def test_retrieval_plan_is_exact_in_its_answer_call(tmp_path):
    """The real embedder (all-MiniLM-L6-v2) ranks the chunks in the plan and in the run."""
    cfg = _cfg(tmp_path, "rag", strategy="retrieval", context_window=400, limit=2)
    plan = _plan(cfg)
    real = _real(cfg)
    for task in cfg.tasks:
        p, r = plan["tasks"][task], real[task]
        assert p["stages"]["answer"]["exact"] == ["calls", "prefill"]
        assert (p["calls"], p["prefill_tokens"]) == (
            r["stats"]["llm_calls"],
            r["stats"]["prompt_tokens"],
        )


def test_reply_tokens_and_time_estimate(tmp_path):
    cfg = _cfg(tmp_path, "t", strategy="mapreduce", context_window=400, plan_reply_tokens=5)
    rates = {"prefill": 1000.0, "decode": 10.0}
    plan = _plan(cfg, rates=rates)
    tot = plan["total"]
    assert tot["decode_tokens"] == 5 * tot["calls"]
    for t in plan["tasks"].values():  # the stages add up to the task's totals
        for key in ("calls", "prefill_tokens", "decode_tokens"):
            assert sum(s[key] for s in t["stages"].values()) == t[key]
        assert all(s["decode_tokens"] == 5 * s["calls"] for s in t["stages"].values())
    computed = tot["computed"]  # the time is what the model computes: repeats are kept calls
    expected = computed["prefill_tokens"] / 1000.0 + computed["decode_tokens"] / 10.0
    assert plan["estimated_seconds"] == pytest.approx(expected, abs=0.05)
    # shorter replies: the map wave does not change, the reduce prompt shrinks
    full = _plan(_cfg(tmp_path, "t2", strategy="mapreduce", context_window=400))
    for task in cfg.tasks:
        short, long_ = plan["tasks"][task]["stages"], full["tasks"][task]["stages"]
        assert short["map"]["prefill_tokens"] == long_["map"]["prefill_tokens"]
        assert short["reduce"]["prefill_tokens"] < long_["reduce"]["prefill_tokens"]


def test_rates_parse():
    assert parse_rates("prefill=3000,decode=30.5") == {"prefill": 3000.0, "decode": 30.5}
    assert parse_rates("probe") == "probe" and parse_rates(" kept ") == "kept"
    assert parse_rates(None) is None
    for bad in ("prefill=3000", "prefill=0,decode=1", "fast", "prefill=1,decode=x"):
        with pytest.raises(BadInput, match="--plan-rates"):
            parse_rates(bad)


def test_dry_run_llm_answers_without_the_model():
    llm = load_llm("scripted:passkey")
    dry = DryRunLLM(llm)
    out = dry.generate([Request("The pass key is 12345. What is it?", GenerationParams(7))])
    assert llm.calls == []  # the model was never asked
    assert out[0].completion_tokens == 7 and out[0].prompt_tokens == llm.count_tokens(
        "The pass key is 12345. What is it?"
    )
    rates = probe_rates(llm, "word " * 50)
    assert rates["prefill"] > 0 and rates["decode"] > 0 and len(llm.calls) == 2


def test_cli_plan_prints_and_writes_nothing(tmp_path, capsys):
    from chunkwise.cli import main

    out = tmp_path / "never"
    rc = main(
        [
            "eval",
            "--model",
            "scripted:passkey",
            "--benchmark",
            "infinitebench",
            "--tasks",
            "passkey",
            "--data",
            "synthetic:1K",
            "--limit",
            "2",
            "--strategy",
            "mapreduce",
            "--context-window",
            "400",
            "--output",
            str(out),
            "--plan",
            "--plan-rates",
            "prefill=100,decode=10",
            "--lengths",
            "512,1K",
            "--no-progress",
        ]
    )
    assert rc == 0
    assert not out.exists()
    text = capsys.readouterr().out
    plans = [json.loads(x) for x in text.splitlines() if x.startswith("{")]
    assert [p["data"] for p in plans] == ["synthetic:512", "synthetic:1024"]
    assert (
        plans[1]["tasks"]["passkey"]["stages"]["map"]["calls"]
        > (plans[0]["tasks"]["passkey"]["stages"]["map"]["calls"])
    )
    assert "| passkey | all |" in text and "time at prefill 100 tok/s" in text


@pytest.mark.slow
def test_plan_on_the_embedded_model_matches_its_run(tmp_path, embedded_llm):
    """hf:default's own tokenizer: the standard plan's prefill equals the run's counted
    prompt tokens; the probe measures both rates on it."""
    cfg = EvalConfig(
        model="hf:default",
        benchmark="generated",
        tasks=["passkey"],
        data="heldout:300",
        limit=1,
        output=str(tmp_path / "real"),
    )
    plan = plan_eval(cfg, embedded_llm, progress=False)
    real = run_eval(cfg, llm=embedded_llm, progress=False)["strategy_stats"]["passkey"]
    p = plan["tasks"]["passkey"]
    assert (p["calls"], p["prefill_tokens"]) == (real["llm_calls"], real["prompt_tokens"])
    assert p["decode_tokens"] >= real["completion_tokens"]
    rates = probe_rates(embedded_llm, "The grass is green. " * 100, decode_tokens=8)
    assert rates["prefill"] > 0 and rates["decode"] > 0
    assert rates["probe_decode_tokens"] >= 2


@pytest.mark.slow
def test_a_stopped_run_on_the_embedded_model_is_timed_at_its_own_pace(tmp_path, monkeypatch,
                                                                      embedded_llm):  # fmt: skip
    """hf:default's real batches: the run stops after its first piece of map calls; the kept
    pace is of that piece (its calls, its prompt tokens, at most the run's own wall time),
    and the plan times the rest of the map wave at it."""
    import time

    from chunkwise.eval.plan import pace_rates
    from chunkwise.llm import call_cache

    monkeypatch.setattr(call_cache, "PIECE_CALLS", 2)
    cfg = EvalConfig(model="hf:default", benchmark="generated", tasks=["passkey"],
                     data="heldout:1200", limit=1, strategy="mapreduce", context_window=512,
                     output=str(tmp_path / "stopped"))  # fmt: skip
    t0 = time.perf_counter()
    with pytest.raises(LLMRequestError):
        run_eval(cfg, llm=_Dies(embedded_llm, alive=1), progress=False)
    wall = time.perf_counter() - t0
    rates = pace_rates([Path(cfg.output)])
    kept = rates["kept"]
    assert kept["calls"] == 2 and 0 < kept["seconds"] <= wall
    plan = plan_eval(cfg, embedded_llm, progress=False, rates=rates)
    left = plan["total"]["computed"]
    assert plan["total"]["kept"] == 2 and left["calls"] >= 1
    assert plan["estimated_seconds"] == pytest.approx(  # the plan rounds to 0.1 s
        left["prefill_tokens"] * kept["seconds"] / kept["prompt_tokens"], rel=0.01, abs=0.05
    )
