"""`chunkwise eval --lengths`: the sweep over lengths (one run folder each, finished lengths
skipped on a rerun), the curves with their intervals, and RULER's effective-length rule."""

from __future__ import annotations

import json
import os

import pytest

from chunkwise.errors import BadInput
from chunkwise.eval.config import EvalConfig
from chunkwise.eval.lengths import (
    RULER_THRESHOLD,
    data_at_length,
    effective_length,
    parse_lengths,
    run_lengths,
)
from chunkwise.llm.scripted import SCRIPTS


def _cfg(tmp_path, **kw):
    base = dict(
        model="scripted:passkey",
        benchmark="infinitebench",
        tasks=["passkey"],
        data="synthetic:600",
        lengths=["512,1K,2K"],
        limit=6,
        context_window=700,  # the needle is cut out of longer documents more and more often
        output=str(tmp_path / "sweep"),
    )
    base.update(kw)
    return EvalConfig(**base)


def test_sweep_writes_one_run_per_length_and_curves_with_intervals(tmp_path):
    cfg = _cfg(tmp_path, tasks=["passkey", "number_string"])
    report = run_lengths(cfg, progress=False)
    out = tmp_path / "sweep"
    on_disk = json.loads((out / "lengths.json").read_text())
    assert on_disk["curves"] == report["curves"]
    assert (out / "lengths.png").stat().st_size > 0
    assert report["lengths"] == [512, 1024, 2048]
    for n in (512, 1024, 2048):  # each length a complete run folder of its own
        run = json.loads((out / f"len-{n}" / "results.json").read_text())
        assert run["config"]["data"] == f"synthetic:{n}"
        assert run["config"]["lengths"] == []
        assert report["runs"][str(n)] == str(out / f"len-{n}")
    lines = report["curves"]["standard"]
    assert list(lines) == ["passkey", "number_string", "average"]
    passkey = lines["passkey"]
    assert [p["length"] for p in passkey] == [512, 1024, 2048]
    # the window of 700 tokens holds the whole 512-token document only
    assert passkey[0]["score"] == 100.0
    assert passkey[-1]["score"] < passkey[0]["score"]
    for task, line in lines.items():
        for p in line:
            low, high = p["ci95"]
            assert low <= p["score"] <= high, (task, p)
            assert p["n"] == (12 if task == "average" else 6)
    # the intervals are results.json's own (chunkwise.stats' bootstrap), not recomputed
    run = json.loads((out / "len-2048" / "results.json").read_text())
    assert passkey[-1]["ci95"] == run["results"]["passkey"]["score_ci95"]
    assert passkey[-1]["ci95"][0] < passkey[-1]["ci95"][1]
    eff = report["effective_length"]["standard"]
    assert eff["passkey"]["ruler"]["length"] == 512
    assert eff["number_string"]["ruler"] == {
        "threshold": RULER_THRESHOLD,
        "length": None,
        "below_shortest": True,
        "beyond_longest": False,
    }


def test_rerun_skips_finished_lengths(tmp_path):
    llm = SCRIPTS["passkey"]()
    cfg = _cfg(tmp_path, lengths=["512", "1K"], limit=2)
    first = run_lengths(cfg, progress=False, llm=llm)
    calls = len(llm.calls)
    assert calls == 4  # two lengths of two examples, one call each
    out = tmp_path / "sweep"
    stamp = {n: os.stat(out / f"len-{n}" / "results.json").st_mtime_ns for n in (512, 1024)}
    again = run_lengths(cfg, progress=False, llm=llm)
    assert len(llm.calls) == calls  # nothing answered again
    assert again["curves"] == first["curves"]
    assert {n: os.stat(out / f"len-{n}" / "results.json").st_mtime_ns for n in stamp} == stamp
    # a length added later runs alone; the finished ones stay as they were
    run_lengths(_cfg(tmp_path, lengths=["512", "1K", "2K"], limit=2), progress=False, llm=llm)
    assert len(llm.calls) == calls + 2
    assert {n: os.stat(out / f"len-{n}" / "results.json").st_mtime_ns for n in stamp} == stamp


def _curve(*scores):
    return [{"length": 4096 * 2**i, "score": s} for i, s in enumerate(scores)]


def test_effective_length_rule_on_hand_made_scores():
    t = RULER_THRESHOLD
    # RULER's Yi-34B row: 32K is the last length above 85.6
    yi = effective_length(_curve(93.3, 92.2, 91.3, 87.5, 83.2, 77.3), t)
    assert (yi["length"], yi["below_shortest"], yi["beyond_longest"]) == (32768, False, False)
    # exactly at the threshold does not pass (the score must stay above it)
    assert effective_length(_curve(90.0, 85.6, 90.0), t)["length"] == 4096
    assert effective_length(_curve(90.0, 85.61), t)["length"] == 8192
    # a dip ends it, however the longer lengths score
    assert effective_length(_curve(90.0, 80.0, 95.0, 95.0), t)["length"] == 4096
    # the shortest length already fails: none, said so
    low = effective_length(_curve(85.6, 99.0), t)
    assert (low["length"], low["below_shortest"], low["beyond_longest"]) == (None, True, False)
    # every length passes: the longest tested, and it may be longer still (RULER's ">128K")
    high = effective_length(_curve(99.0, 98.0, 97.0), t)
    assert (high["length"], high["below_shortest"], high["beyond_longest"]) == (16384, False, True)
    # a missing score (a gap) is not a pass
    assert effective_length(_curve(99.0, None, 99.0), t)["length"] == 4096
    # the order of the points does not matter; a user's threshold is the same rule
    shuffled = list(reversed(_curve(60.0, 55.0, 40.0)))
    assert effective_length(shuffled, 50.0)["length"] == 8192
    assert effective_length([], t) == {
        "threshold": t,
        "length": None,
        "below_shortest": False,
        "beyond_longest": False,
    }


def test_user_threshold_is_reported_beside_rulers(tmp_path):
    report = run_lengths(
        _cfg(tmp_path, lengths=["512", "2K"], effective_threshold=20.0), progress=False
    )
    eff = report["effective_length"]["standard"]["passkey"]
    assert report["thresholds"] == {"ruler": 85.6, "user": 20.0}
    assert eff["ruler"]["length"] == 512
    assert eff["user"]["threshold"] == 20.0
    scores = [p["score"] for p in report["curves"]["standard"]["passkey"]]
    assert eff["user"]["length"] == (2048 if scores[-1] > 20.0 else 512)
    # one task: the average curve is that task's, its bootstrap interval included
    assert report["curves"]["standard"]["average"] == report["curves"]["standard"]["passkey"]


def test_lengths_parse_and_sources():
    assert parse_lengths(["4K,8k", "16384", "4096"]) == [4096, 8192, 16384]
    assert parse_lengths(["1m"]) == [1024 * 1024]
    for bad in (["4Q"], ["0"], [","], ["-4K"]):
        with pytest.raises(BadInput, match="--lengths"):
            parse_lengths(bad)
    gen = EvalConfig(benchmark="generated", tasks=["passkey"], data="heldout:4000")
    assert data_at_length(gen, 8192) == "heldout:8192"
    train = EvalConfig(benchmark="generated", tasks=["passkey"], data="train:4000")
    assert data_at_length(train, 2048) == "train:2048"
    ruler = EvalConfig(benchmark="ruler", tasks=["niah_single_1"], data="synthetic:4k")
    assert data_at_length(ruler, 16384) == "synthetic:16384"


def test_a_source_without_a_length_is_refused_in_one_line(tmp_path):
    folder = EvalConfig(benchmark="infinitebench", data=str(tmp_path), lengths=["4K"])
    with pytest.raises(BadInput, match="has no length to vary") as e:
        data_at_length(folder, 4096)
    assert "\n" not in str(e.value)
    hub = EvalConfig(benchmark="infinitebench", data="hub", lengths=["4K"])
    with pytest.raises(BadInput, match="has no length to vary"):
        run_lengths(hub, progress=False)


def test_cli_refuses_two_sweeps_at_once(tmp_path, capsys):
    from chunkwise.cli import main

    argv = ["eval", "--model", "scripted:passkey", "--data", "synthetic:1K", "--lengths", "1K"]
    rc = main([*argv, "--checkpoints", "all", "--output", str(tmp_path / "x")])
    assert rc != 0
    assert "two sweeps" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_cli_lengths_prints_effective_lengths(tmp_path, capsys):
    from chunkwise.cli import main

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
            "synthetic:600",
            "--lengths",
            "512,1K",
            "--limit",
            "2",
            "--output",
            str(tmp_path / "cli"),
            "--no-progress",
        ]
    )
    assert rc == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["effective_length"]["passkey"] == {"ruler": 1024}
    assert summary["scores"]["passkey"] == {"512": 100.0, "1024": 100.0}
    assert (tmp_path / "cli" / "lengths.json").is_file()


@pytest.mark.slow
def test_lengths_on_the_embedded_model(tmp_path, embedded_llm):
    """hf:default, standard decoding, generated passkey documents at two lengths, n=2."""
    cfg = EvalConfig(
        model="hf:default",
        benchmark="generated",
        tasks=["passkey"],
        data="heldout:4000",
        lengths=["300", "600"],
        limit=2,
        output=str(tmp_path / "real"),
    )
    report = run_lengths(cfg, progress=False, llm=embedded_llm)
    line = report["curves"]["standard"]["passkey"]
    assert [p["length"] for p in line] == [300, 600]
    for p, n in zip(line, (300, 600), strict=True):
        run = json.loads((tmp_path / "real" / f"len-{n}" / "results.json").read_text())
        assert run["config"]["data"] == f"heldout:{n}"
        assert run["model"]["spec"] == "hf:default"
        assert p["n"] == 2 and p["score"] == run["results"]["passkey"]["score"]
        assert p["ci95"] == run["results"]["passkey"]["score_ci95"]
        # each document read at its own length: the prompt grows with it
        assert run["strategy_stats"]["passkey"]["prompt_tokens"] > 2 * 0.8 * n
    # one task: the average is that task, with its own interval
    assert report["curves"]["standard"]["average"] == line
    eff = report["effective_length"]["standard"]["passkey"]["ruler"]
    scores = [p["score"] for p in line]
    expected = None if scores[0] <= 85.6 else (300 if scores[1] <= 85.6 else 600)
    assert eff["length"] == expected
