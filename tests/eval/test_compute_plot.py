"""`chunkwise compare --compute-plot`: each run's compute per example beside its score, read
from two real results.json files (standard and MapReduce on a scripted model)."""

from __future__ import annotations

import json

import pytest

from chunkwise.errors import BadInput
from chunkwise.eval.compute_plot import compute_table, panels, to_markdown, write_compute
from chunkwise.eval.config import EvalConfig
from chunkwise.eval.runner import run_eval


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("compute")
    common = dict(
        model="scripted:passkey",
        benchmark="infinitebench",
        tasks=["passkey", "number_string"],
        data="synthetic:1K",
        limit=4,
    )
    std = run_eval(
        EvalConfig(**common, context_window=700, output=str(root / "standard")), progress=False
    )
    mr = run_eval(
        EvalConfig(**common, strategy="mapreduce", context_window=400, output=str(root / "mr")),
        progress=False,
    )
    return root, std, mr


def test_table_holds_each_runs_score_and_compute_per_example(two_runs):
    root, std, mr = two_runs
    table = compute_table([root / "standard", root / "mr"], ["standard", "mr"])
    rows = {r["label"]: r for r in table["runs"]}
    for label, results in (("standard", std), ("mr", mr)):
        for task in ("passkey", "number_string"):
            row = rows[label]["tasks"][task]
            per = results["strategy_stats"][task]["per_example"]
            assert row["prefill_tokens"] == per["prompt_tokens"]
            assert row["decode_tokens"] == per["completion_tokens"]
            assert row["llm_calls"] == per["llm_calls"]
            assert row["seconds"] == per["seconds"]
            assert row["score"] == results["results"][task]["score"]
            assert row["ci95"] == results["results"][task]["score_ci95"]
            assert row["n"] == 4
        avg = rows[label]["tasks"]["average"]
        assert (
            avg["prefill_tokens"]
            == results["strategy_stats"]["all"]["per_example"]["prompt_tokens"]
        )
        assert avg["score"] == results["average"]["score"] and avg["n"] == 8
    # standard decoding makes one call per example; MapReduce one per chunk and a reduce
    assert rows["standard"]["tasks"]["passkey"]["llm_calls"] == 1.0
    assert rows["mr"]["tasks"]["passkey"]["llm_calls"] > 2.0
    assert rows["mr"]["strategy"] == "mapreduce" and rows["standard"]["strategy"] == "standard"
    assert panels(table) == ["passkey", "number_string", "average"]
    text = to_markdown(table)
    assert "prefill/ex" in text and text.count("\n") == 1 + 2 * 3


def test_compare_cli_writes_png_and_json(two_runs, tmp_path, capsys):
    from chunkwise.cli import main

    root, std, _ = two_runs
    png = tmp_path / "out" / "compute.png"
    rc = main(
        [
            "compare",
            str(root / "standard"),
            str(root / "mr"),
            "--compute-plot",
            str(png),
            "--json",
            str(tmp_path / "table.json"),
        ]
    )
    assert rc == 0
    assert png.stat().st_size > 0
    beside = json.loads(png.with_suffix(".json").read_text())
    assert [r["label"] for r in beside["runs"]] == ["standard", "mr"]
    whole = json.loads((tmp_path / "table.json").read_text())
    assert whole["compute"]["runs"] == beside["runs"]
    out = capsys.readouterr().out
    assert "| standard | passkey |" in out and "calls/ex" in out
    x = beside["runs"][0]["tasks"]["passkey"]["prefill_tokens"]
    assert x == std["strategy_stats"]["passkey"]["per_example"]["prompt_tokens"]


def test_one_shared_task_draws_no_average_panel_and_bad_inputs_are_refused(two_runs, tmp_path):
    root, _, _ = two_runs
    one = run_eval(
        EvalConfig(
            model="scripted:passkey",
            benchmark="infinitebench",
            tasks=["passkey"],
            data="synthetic:1K",
            limit=2,
            output=str(tmp_path / "one"),
        ),
        progress=False,
    )
    assert one is not None
    table = write_compute([root / "standard", tmp_path / "one"], ["a", "b"], tmp_path / "p.png")
    assert panels(table) == ["passkey"]
    with pytest.raises(BadInput, match="not found"):
        compute_table([tmp_path / "missing"], ["x"])
    with pytest.raises(BadInput, match="holds several runs"):
        compute_table([root], ["both"])  # a folder of run folders: one column in compare


def test_one_task_average_keeps_the_tasks_own_interval(tmp_path):
    run = run_eval(
        EvalConfig(
            model="scripted:passkey",
            benchmark="infinitebench",
            tasks=["passkey"],
            data="synthetic:1K",
            limit=4,
            context_window=700,
            output=str(tmp_path / "one"),
        ),
        progress=False,
    )
    row = compute_table([tmp_path / "one"], ["one"])["runs"][0]["tasks"]
    assert (
        row["average"]["ci95"] == row["passkey"]["ci95"] == run["results"]["passkey"]["score_ci95"]
    )
    assert 0.0 <= row["average"]["ci95"][0] <= row["average"]["ci95"][1] <= 100.0
