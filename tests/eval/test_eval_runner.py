"""`chunkwise eval` with the scripted model: run folder, resume after a crash or a kill,
refusals (other config, foreign ids, unknown task / strategy), merging shards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from chunkwise import cli
from chunkwise.errors import BadInput
from chunkwise.eval.distributed import Dist
from chunkwise.eval.runner import EvalConfig, run_eval
from chunkwise.llm import Request, scripted
from chunkwise.strategies import STRATEGIES, Answer, Stats, Strategy

REPO = Path(__file__).resolve().parents[2]
TIMING = {"seconds", "latency_s"}


@pytest.fixture
def main(monkeypatch):
    """cli.main restricted to this issue's verbs (other command modules may not exist yet)."""
    monkeypatch.setattr(cli, "COMMANDS", {"eval": "evaluate", "compare": "compare"})
    return cli.main


def argv(out, *extra, model="scripted:passkey", strategy="standard", tasks="passkey", n=6):
    return [
        "eval",
        "--model",
        model,
        "--strategy",
        strategy,
        "--tasks",
        tasks,
        "--data",
        "synthetic:400",
        "--limit",
        str(n),
        "--output",
        str(out),
        "--no-progress",
        *extra,
    ]


def lines(path):
    return [json.loads(x) for x in Path(path).read_text().splitlines() if x.strip()]


def untimed(obj):
    """A record without wall-clock fields (the only part of a run that may differ)."""
    if isinstance(obj, dict):
        return {k: untimed(v) for k, v in obj.items() if k not in TIMING}
    if isinstance(obj, list):
        return [untimed(v) for v in obj]
    return obj


def crashing_passkey(after):
    """A scripted:passkey factory whose model raises on its (after+1)-th generate call."""
    original = scripted.SCRIPTS["passkey"]

    def factory():
        llm = original()
        inner = llm._generate
        calls = {"n": 0}

        def generate(requests):
            calls["n"] += 1
            if calls["n"] > after:
                raise RuntimeError("simulated crash")
            return inner(requests)

        llm._generate = generate
        return llm

    return factory


def test_run_folder_layout_and_results(main, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(argv(out, tasks="passkey,kv_retrieval", n=4)) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["scores"] == {"passkey": 100.0, "kv_retrieval": 0.0}
    assert summary["average"] == 50.0

    cfg = (out / "config.yaml").read_text()
    assert "model: scripted:passkey" in cfg and "data: synthetic:400" in cfg
    preds = lines(out / "predictions" / "passkey.jsonl")
    assert [p["id"] for p in preds] == [0, 1, 2, 3]
    for p in preds:
        assert {"id", "prediction", "ground_truth", "strategy", "model", "stats", "trace"} <= set(p)
        assert p["prediction"] == p["ground_truth"] and p["strategy"] == "standard"
        assert p["model"] == "scripted:passkey" and p["question"] == "What is the pass key?"
        assert p["stats"]["llm_calls"] == 1 and p["trace"][0]["stage"] == "generate"

    res = json.loads((out / "results.json").read_text())
    assert res["results"]["passkey"]["score"] == 100.0 and res["results"]["passkey"]["n"] == 4
    assert res["results"]["passkey"]["alias"] == "Retrieve.PassKey"
    assert res["config"]["strategy"] == "standard" and res["config"]["limit"] == 4
    assert res["data"]["passkey"] == {"source": "synthetic", "length": 400, "seed": 0, "n": 4}
    for name in ("chunkwise", "torch", "transformers", "python"):
        assert res["versions"][name]
    assert "git_hash" in res and res["date"]
    assert res["timing"]["resumed"] is False and res["timing"]["session_seconds"] > 0
    stats = res["strategy_stats"]
    assert stats["passkey"]["llm_calls"] == 4
    assert stats["passkey"]["prompt_tokens"] == sum(p["stats"]["prompt_tokens"] for p in preds)
    assert stats["all"]["llm_calls"] == 8 and stats["all"]["examples"] == 8
    assert (
        stats["all"]["tokens"] == stats["all"]["prompt_tokens"] + stats["all"]["completion_tokens"]
    )
    assert res["model"]["prompt_kind"] == "base" and res["distributed"]["world_size"] == 1


def test_strategies_are_decoding_modes_by_name(main, tmp_path):
    for name in ("standard", "mapreduce"):
        out = tmp_path / name
        assert main(argv(out, "--strategy-args", "temperature=0", strategy=name, n=2)) == 0
        preds = lines(out / "predictions" / "passkey.jsonl")
        assert [p["strategy"] for p in preds] == [name, name]
        res = json.loads((out / "results.json").read_text())
        assert res["strategy"]["args"] == {"temperature": "0"}
    mr = lines(tmp_path / "mapreduce" / "predictions" / "passkey.jsonl")[0]
    stages = [e["stage"] for e in mr["trace"]]
    assert stages.count("map") >= 1 and stages[-1] == "reduce"
    assert mr["stats"]["llm_calls"] == len(stages) >= 2


class _Tail(Strategy):
    """A strategy the runner has never heard of: answer from the document's last words."""

    name = "test_tail"

    def __init__(self, window=None, words: int = 3):
        super().__init__(window)
        self.words = words

    def run(self, document, query, llm):
        stats = Stats()
        out = self.call(llm, [Request("pass key is " + document.split()[-1])], stats)
        return Answer(" ".join(document.split()[-self.words :]) + out[0].text, [], stats)


def test_a_newly_registered_strategy_needs_no_runner_change(main, tmp_path, monkeypatch):
    monkeypatch.setitem(STRATEGIES, _Tail.name, _Tail)
    out = tmp_path / "tail"
    assert main(argv(out, "--strategy-args", "words=2", strategy="test_tail", n=2)) == 0
    preds = lines(out / "predictions" / "passkey.jsonl")
    assert [p["strategy"] for p in preds] == ["test_tail", "test_tail"]
    assert all(p["stats"]["llm_calls"] == 1 and len(p["prediction"].split()) >= 2 for p in preds)
    assert main(argv(tmp_path / "bad", "--strategy-args", "lines=2", strategy="test_tail")) == 2


def test_resume_after_a_crash_gives_the_uninterrupted_result(main, tmp_path, monkeypatch):
    whole = tmp_path / "whole"
    assert main(argv(whole, n=6)) == 0

    out = tmp_path / "crashed"
    with monkeypatch.context() as m:
        m.setitem(scripted.SCRIPTS, "passkey", crashing_passkey(after=4))
        with pytest.raises(RuntimeError, match="simulated crash"):
            main(argv(out, n=6))
    assert [p["id"] for p in lines(out / "predictions" / "passkey.jsonl")] == [0, 1, 2, 3]
    assert not (out / "results.json").exists()

    with monkeypatch.context() as m:  # the resumed session must answer only ids 4 and 5
        m.setitem(scripted.SCRIPTS, "passkey", crashing_passkey(after=2))
        assert main(argv(out, n=6)) == 0
    got = lines(out / "predictions" / "passkey.jsonl")
    assert [p["id"] for p in got] == [0, 1, 2, 3, 4, 5]
    assert untimed(got) == untimed(lines(whole / "predictions" / "passkey.jsonl"))
    a = json.loads((out / "results.json").read_text())
    b = json.loads((whole / "results.json").read_text())
    assert a["results"] == b["results"]
    assert untimed(a["strategy_stats"]) == untimed(b["strategy_stats"])
    assert a["timing"]["resumed"] is True


KILL_SCRIPT = """
import os, signal, sys
from chunkwise import cli
from chunkwise.llm import Request, scripted
from chunkwise.strategies import STRATEGIES, Answer, Stats, Strategy
original = scripted.SCRIPTS["passkey"]
def factory():
    llm = original()
    inner = llm._generate
    calls = {"n": 0}
    def generate(requests):
        calls["n"] += 1
        if calls["n"] > int(os.environ["KILL_AFTER"]):
            os.kill(os.getpid(), signal.SIGKILL)
        return inner(requests)
    llm._generate = generate
    return llm
scripted.SCRIPTS["passkey"] = factory
sys.exit(cli.main(sys.argv[1:]))
"""


def test_killed_process_resumes_with_every_id_once(tmp_path):
    out = tmp_path / "killed"
    args = argv(out, n=7)
    env = {**os.environ, "KILL_AFTER": "3"}
    res = subprocess.run(
        [sys.executable, "-c", KILL_SCRIPT, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == -signal.SIGKILL, res.stderr
    path = out / "predictions" / "passkey.jsonl"
    assert [p["id"] for p in lines(path)] == [0, 1, 2]
    with path.open("a") as f:  # what a kill in the middle of a write leaves behind
        f.write('{"id": 3, "prediction": "123')

    res = subprocess.run(
        [sys.executable, "-m", "chunkwise.cli", *args], capture_output=True, text=True, timeout=120
    )
    assert res.returncode == 0, res.stderr
    ids = [p["id"] for p in lines(path)]
    assert ids == list(range(7))  # every id exactly once, in data order
    results = json.loads((out / "results.json").read_text())
    assert {
        "alias": "Retrieve.PassKey",
        "score": 100.0,
        "score,none": 100.0,
        "score_stderr,none": 0.0,
        "n": 7,
        "errors": 0,
        "scorer": "official",
        "extract": "none",
    }.items() <= results["results"]["passkey"].items()


def test_refuses_to_resume_a_run_with_another_config(main, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(argv(out, n=3)) == 0
    before = (out / "predictions" / "passkey.jsonl").read_text()
    capsys.readouterr()
    assert main(argv(out, "--context-window", "4000", model="scripted:echo", n=4)) == 2
    err = capsys.readouterr().err
    assert "cannot be resumed" in err
    assert "model: 'scripted:passkey' -> 'scripted:echo'" in err
    assert "limit: 3 -> 4" in err and "context_window: None -> 4000" in err
    assert "strategy" not in err.split("differences")[1]  # only the keys that differ
    assert (out / "predictions" / "passkey.jsonl").read_text() == before


def test_rescoring_a_finished_run_makes_no_model_calls(main, tmp_path, monkeypatch):
    out = tmp_path / "run"
    assert main(argv(out, n=3)) == 0
    before = (out / "predictions" / "passkey.jsonl").read_text()
    monkeypatch.setitem(scripted.SCRIPTS, "passkey", crashing_passkey(after=0))
    first = (out / "results.json").read_text()
    assert main(argv(out, "--scorer", "lenient", n=3)) == 0  # scorer may change: no new calls
    assert (out / "results.json").read_text() == first  # the first scoring is kept ...
    res = json.loads((out / "results_lenient_none.json").read_text())  # ... beside the new one
    assert res["results"]["passkey"]["scorer"] == "lenient" and res["config"]["scorer"] == "lenient"
    assert res["files"]["results"] == "results_lenient_none.json"
    assert (out / "predictions" / "passkey.jsonl").read_text() == before
    # the same scoring again replaces its own file, nothing else
    assert main(argv(out, "--scorer", "lenient", n=3)) == 0
    assert sorted(p.name for p in out.glob("results*.json")) == [
        "results.json",
        "results_lenient_none.json",
    ]


def test_predictions_for_ids_not_in_the_data_are_an_error(main, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(argv(out, n=3)) == 0
    with (out / "predictions" / "passkey.jsonl").open("a") as f:
        f.write(json.dumps({"id": 41, "prediction": "1", "ground_truth": "1"}) + "\n")
        f.write(json.dumps({"id": "x7", "prediction": "1", "ground_truth": "1"}) + "\n")
    capsys.readouterr()
    assert main(argv(out, n=3)) == 2
    err = capsys.readouterr().err
    assert "ids that are not in the data" in err and "41" in err and "'x7'" in err


def test_unknown_task_strategy_and_data_are_errors_listing_valid_ones(main, tmp_path, capsys):
    assert main(argv(tmp_path / "a", tasks="passkey,pass_key")) == 2
    err = capsys.readouterr().err
    assert "unknown infinitebench task 'pass_key'" in err
    assert "valid tasks: passkey, number_string, kv_retrieval" in err
    assert main(argv(tmp_path / "b", strategy="map_reduce")) == 2
    err = capsys.readouterr().err
    assert "unknown strategy 'map_reduce'" in err and "mapreduce" in err and "standard" in err
    assert (
        main(
            [
                "eval",
                "--model",
                "scripted:passkey",
                "--data",
                "synthetic:lots",
                "--output",
                str(tmp_path / "c"),
            ]
        )
        == 2
    )
    assert "synthetic:LENGTH" in capsys.readouterr().err
    assert main(argv(tmp_path / "d", "--scorer", "strict")) == 2
    assert "valid scorers: official, lenient" in capsys.readouterr().err
    assert main(argv(tmp_path / "f", "--benchmark", "infinite_bench")) == 2
    err = capsys.readouterr().err
    assert "unknown benchmark 'infinite_bench'; valid benchmarks: generated, infinitebench," in err
    assert main(argv(tmp_path / "e", model="nosuch:model")) == 2
    assert "unknown backend 'nosuch'" in capsys.readouterr().err
    assert not any((tmp_path / x).exists() for x in "abcdef")  # checked before anything is written


def test_folder_with_predictions_but_no_config_is_refused(main, tmp_path, capsys):
    out = tmp_path / "run"
    (out / "predictions").mkdir(parents=True)
    (out / "predictions" / "passkey.jsonl").write_text('{"id": 0}\n')
    assert main(argv(out)) == 2
    assert "config.yaml is missing" in capsys.readouterr().err


class _NoBarrier(Dist):
    def barrier(self):  # one rank run alone, as after a crash of the others
        pass


def test_single_process_resume_merges_an_interrupted_sharded_run(tmp_path):
    out = tmp_path / "run"
    cfg = EvalConfig(
        model="scripted:passkey", tasks=["passkey"], data="synthetic:400", limit=5, output=str(out)
    )
    assert run_eval(cfg, dist=_NoBarrier(rank=1, world=2), progress=False) is None
    shard = out / "predictions" / "shards" / "passkey.rank1.jsonl"
    assert [p["id"] for p in lines(shard)] == [1, 3]

    llm = scripted.SCRIPTS["passkey"]()
    results = run_eval(cfg, llm=llm, progress=False)
    assert len(llm.calls) == 3  # only ids 0, 2 and 4 were still to answer
    assert [p["id"] for p in lines(out / "predictions" / "passkey.jsonl")] == [0, 1, 2, 3, 4]
    assert not shard.exists() and not shard.parent.exists()
    assert results["results"]["passkey"]["n"] == 5
    assert results["distributed"]["shard_lines"] == {"passkey": {"rank1": 2}}


def test_example_errors_are_recorded_not_fatal(tmp_path, monkeypatch):
    from chunkwise.strategies.standard import Standard

    def fail_on_odd(self, document, query, llm):
        fail_on_odd.n += 1
        if fail_on_odd.n % 2 == 0:  # the 2nd and 4th examples
            raise BadInput("this example cannot be answered")
        return original(self, document, query, llm)

    fail_on_odd.n = 0
    original = Standard.run
    monkeypatch.setattr(Standard, "run", fail_on_odd)
    cfg = EvalConfig(
        model="scripted:passkey", data="synthetic:400", limit=4, output=str(tmp_path / "r")
    )
    res = run_eval(cfg, progress=False)
    assert res["results"]["passkey"]["errors"] == 2 and res["results"]["passkey"]["score"] == 50.0
    bad = [p for p in lines(tmp_path / "r" / "predictions" / "passkey.jsonl") if "error" in p]
    assert [p["id"] for p in bad] == [1, 3] and all(p["prediction"] == "" for p in bad)


def test_recipe_round_trip(tmp_path):
    """config.yaml is itself a recipe: eval/run.py reruns it (here: resumes, nothing to do)."""
    from chunkwise.config import load_config

    out = tmp_path / "run"
    cfg = load_config(
        EvalConfig,
        REPO / "recipes" / "eval" / "passkey-smoke.yaml",
        ["--model=scripted:passkey", f"--output={out}", "--data=synthetic:400"],
    )
    run_eval(cfg, progress=False)
    again = load_config(EvalConfig, out / "config.yaml")
    assert again == cfg.resolved()
    res = subprocess.run(
        [
            sys.executable,
            str(REPO / "eval" / "run.py"),
            "--config",
            str(out / "config.yaml"),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["scores"] == {"passkey": 100.0}
    assert json.loads((out / "results.json").read_text())["timing"]["resumed"] is True


def test_local_folder_of_official_files(main, tmp_path):
    data = tmp_path / "ib"
    data.mkdir()
    records = [
        {
            "id": i,
            "context": f"Noise. The pass key is {k}. Remember it. More noise.",
            "input": "What is the pass key?",
            "answer": [k],
            "options": [],
        }
        for i, k in enumerate(["11111", "22222", "33333"])
    ]
    (data / "passkey.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "run"
    args = [
        "eval",
        "--model",
        "scripted:passkey",
        "--tasks",
        "passkey",
        "--data",
        str(data),
        "--limit",
        "2",
        "--output",
        str(out),
        "--no-progress",
    ]
    assert main(args) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["data"]["passkey"] == {"source": "local", "path": str(data / "passkey.jsonl")}
    assert res["n-samples"]["passkey"] == {"original": 3, "effective": 2}
    assert res["results"]["passkey"]["score"] == 100.0
    assert [p["ground_truth"] for p in lines(out / "predictions" / "passkey.jsonl")] == [
        "11111",
        "22222",
    ]


def test_tree_stats_are_summed_when_a_strategy_reports_them():
    from chunkwise.eval.runner import _stat_block, _stat_sums

    per = [
        {
            "llm_calls": 5,
            "prompt_tokens": 100,
            "completion_tokens": 10,
            "seconds": 1.5,
            "summary_nodes": 3,
            "build_seconds": 0.25,
            "llm_calls_by_kind": {"toc": 1, "summarize": 3, "answer": 1},
        },
        {
            "llm_calls": 2,
            "prompt_tokens": 50,
            "completion_tokens": 5,
            "seconds": 0.5,
            "summary_nodes": 1,
            "build_seconds": 0.5,
            "llm_calls_by_kind": {"summarize": 1, "answer": 1},
        },
    ]
    block = _stat_block(_stat_sums(per), 2)
    assert block["summary_nodes"] == 4
    assert block["build_seconds"] == 0.75
    assert block["llm_calls_by_kind"] == {"toc": 1, "summarize": 4, "answer": 2}
    assert block["per_example"]["summary_nodes"] == 2.0
    assert block["per_example"]["llm_calls_by_kind"]["summarize"] == 2.0
    assert block["tokens"] == 165
    # a strategy without tree stats gets none of those keys
    plain = _stat_block(_stat_sums([{"llm_calls": 1, "prompt_tokens": 3}]), 1)
    assert "summary_nodes" not in plain and "llm_calls_by_kind" not in plain
    assert plain["completion_tokens"] == 0


def test_tasks_all_and_a_fractional_limit(main, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(argv(out, "--limit", "0.1", tasks="all", n=None)) == 0
    res = json.loads((out / "results.json").read_text())
    # synthetic data provides five tasks; 10% of the 20 it makes by default, rounded up
    assert set(res["results"]) == {
        "passkey",
        "number_string",
        "kv_retrieval",
        "math_find",
        "code_run",
    }
    assert all(r["n"] == 2 for r in res["results"].values())
    assert res["config"]["limit"] == 0.1 and res["config"]["tasks"] == ["all"]
    assert main(argv(tmp_path / "bad", "--limit", "1.5", n=None)) == 2
    assert "fraction between 0 and 1" in capsys.readouterr().err


def test_failed_examples_are_tried_again_on_rerun(main, tmp_path, monkeypatch):
    from chunkwise.errors import BadInput

    original = scripted.SCRIPTS["passkey"]

    def flaky():
        llm = original()
        inner, calls = llm._generate, {"n": 0}

        def generate(requests):
            calls["n"] += 1
            if calls["n"] == 2:
                raise BadInput("this example cannot be answered right now")
            return inner(requests)

        llm._generate = generate
        return llm

    out = tmp_path / "run"
    monkeypatch.setitem(scripted.SCRIPTS, "passkey", flaky)
    assert main(argv(out, n=3)) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["results"]["passkey"]["errors"] == 1
    monkeypatch.setitem(scripted.SCRIPTS, "passkey", original)
    assert main(argv(out, n=3)) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["results"]["passkey"]["errors"] == 0 and res["results"]["passkey"]["score"] == 100
    preds = lines(out / "predictions" / "passkey.jsonl")
    assert [p["id"] for p in preds] == [0, 1, 2] and not any("error" in p for p in preds)


def test_results_carry_stderr_lm_eval_keys_and_hashes(main, tmp_path):
    out = tmp_path / "run"
    assert main(argv(out, "--log-samples", tasks="passkey,kv_retrieval", n=4)) == 0
    res = json.loads((out / "results.json").read_text())
    pk = res["results"]["passkey"]
    assert pk["score,none"] == pk["score"] == 100.0 and pk["score_stderr,none"] == 0.0
    assert pk["score_ci95"] == [100.0, 100.0]
    assert res["higher_is_better"] == {"passkey": {"score": True}, "kv_retrieval": {"score": True}}
    assert res["n-samples"]["passkey"] == {"original": 4, "effective": 4}
    assert set(res["task_hashes"]) == {"passkey", "kv_retrieval"}
    assert res["templates"] == {"kind": "chunkwise", "version": "ib-2"}
    assert res["model"]["provenance"] == {
        "spec": "scripted:passkey",
        "backend": "scripted",
        "target": "passkey",
    }
    pred = lines(out / "predictions" / "passkey.jsonl")[0]
    assert pred["prompt"].endswith("What is the pass key?\nThe pass key is")
    assert pred["raw_output"].strip() == pred["prediction"]
    sample = lines(out / "samples" / "passkey.jsonl")[0]
    assert sample["prompt"] == pred["prompt"] and sample["score"] == 1.0
    assert sample["extracted"] == pred["prediction"]


def test_bootstrap_interval_brackets_the_mean():
    from chunkwise.eval.results import bootstrap

    b = bootstrap([1.0] * 30 + [0.0] * 70, seed=0)
    assert b["mean"] == pytest.approx(30.0)
    assert 3.5 < b["stderr"] < 5.7  # the binomial stderr is 4.58
    assert b["ci95"][0] < 30.0 < b["ci95"][1] and b["ci95"][1] - b["ci95"][0] > 10
    assert bootstrap([1.0]) == {"mean": 100.0, "stderr": 0.0, "ci95": [100.0, 100.0], "rounds": 0}


def test_data_is_checked_before_the_model_loads(main, tmp_path, capsys, monkeypatch):
    def no_model(*a, **k):
        raise AssertionError("the model was loaded before the data was checked")

    monkeypatch.setattr("chunkwise.llm.load_llm", no_model)
    data = tmp_path / "data"
    data.mkdir()
    out = tmp_path / "run"
    assert main(["eval", "--model=scripted:passkey", f"--data={data}", f"--output={out}"]) == 2
    assert "passkey.jsonl not found" in capsys.readouterr().err
    assert not out.exists()
