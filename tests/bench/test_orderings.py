"""bench/orderings.py end to end on the capped scripted reader of tree-structured multi-hop
documents (fast, no real model)."""

from __future__ import annotations

import json
import re

import pytest

from bench_loader import load_bench
from chunkwise.data import multihop as mh
from chunkwise.stats import wilson_interval


@pytest.fixture(scope="module")
def bench():
    return load_bench("orderings")


ARGS = ["--skip-model", "--n", "8", "--similarity", "bm25", "--caps", "1.0,1.5", "--batch", "3"]


def test_bench_end_to_end_on_the_scripted_reader(bench, tmp_path, capsys):
    out = tmp_path / "run"
    result = bench.main([*ARGS, "--out", str(out)])
    assert {p.name for p in out.iterdir()} >= {
        "results.json",
        "table.md",
        "cells.jsonl",
        "orderings.png",
    }
    saved = json.loads((out / "results.json").read_text())
    assert saved["methods"] == ["default", "dense", "chowliu", "dfs"]
    assert [(s["question"], s["cap_factor"]) for s in saved["settings"]] == [
        ("all", 1.0), ("all", 1.5), ("leaf", 1.0), ("leaf", 1.5)
    ]  # fmt: skip
    for st in saved["settings"]:
        assert st["arm"] == "scripted" and st["binds"]
        assert st["cap_tokens"] < st["all_facts_tokens_min"]
        assert set(st["cells"]) == set(saved["methods"])
        for c in st["cells"].values():
            k = int(sum(c["scores"]))
            assert c["n"] == 8 and c["accuracy"] == pytest.approx(100 * k / 8, abs=0.01)
            assert c["ci95"] == pytest.approx([round(x, 2) for x in wilson_interval(k, 8)])
        assert set(st["verdict"]["chowliu_minus"]) == {"default", "dense", "dfs"}
    assert len((out / "cells.jsonl").read_text().splitlines()) == 16
    table = (out / "table.md").read_text()
    assert table.count("| scripted |") == 4 and "Wilson" in table
    vs_next = r"\| [+-]\d+ \[[+-]\d+, [+-]\d+\] vs (default|dense|dfs), p (=|<) [\d.e-]+ \|$"
    assert len(re.findall(vs_next, table, flags=re.M)) == 4  # chowliu against the next best
    assert result["structure"]["all"]["evidence_edges_read_parent_first"]
    assert "| scripted | all |" in capsys.readouterr().out


def test_bench_ledger_reuses_finished_cells_and_reruns_a_cut_one(bench, tmp_path, monkeypatch):
    out = tmp_path / "run"
    first = bench.main([*ARGS, "--questions", "all", "--out", str(out)])
    ledger = out / "cells.jsonl"
    lines = ledger.read_text().splitlines()
    assert len(lines) == 8

    def boom(*a, **k):
        raise AssertionError("a finished cell was run again")

    monkeypatch.setattr(bench, "run_cell", boom)
    again = bench.main([*ARGS, "--questions", "all", "--out", str(out)])
    assert again["settings"] == first["settings"]

    # a crash cut the last line: only that cell runs again
    ledger.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:25])
    calls = []
    monkeypatch.undo()
    real = bench.run_cell

    def counting(*a, **k):
        calls.append(a[3])
        return real(*a, **k)

    monkeypatch.setattr(bench, "run_cell", counting)
    third = bench.main([*ARGS, "--questions", "all", "--out", str(out)])
    assert calls == ["dfs"]

    def timeless(settings):
        return [
            {**st, "cells": {m: {**c, "seconds": None} for m, c in st["cells"].items()}}
            for st in settings
        ]

    assert timeless(third["settings"]) == timeless(first["settings"])


def test_bench_model_arm_batches_and_is_its_own_ledger_cell(bench, tmp_path, monkeypatch):
    """The model arm with a stand-in model (the scripted reader): answers go through
    answer_many in --batch sized waves and land in their own cells."""
    seen = []

    def fake_load(spec):
        llm = mh.tree_reader(40)
        inner = llm._generate

        def counted(reqs):
            seen.append(len(reqs))
            return inner(reqs)

        llm._generate = counted
        llm.spec = spec
        return llm

    monkeypatch.setattr(bench, "load_llm", fake_load)
    out = tmp_path / "run"
    args = ["--n", "5", "--similarity", "bm25", "--questions", "leaf", "--batch", "5"]
    res = bench.main(
        [*args, "--model", "scripted:stand-in", "--prompts", "chat", "--out", str(out)]
    )
    arms = [s["arm"] for s in res["settings"]]
    assert arms == ["scripted", "model"]
    model = res["settings"][1]
    assert model["model"] == "scripted:stand-in"
    assert all(c["n"] == 5 and c["prompt_kind"] == "chat" for c in model["cells"].values())
    assert max(seen) == 5  # one wave of 5 documents per worker step
    keys = [json.loads(line)["key"] for line in (out / "cells.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 8


def test_winner_is_clear_only_when_mcnemar_separates_it(bench):
    def cells(**scores):
        return {m: {"scores": s} for m, s in scores.items()}

    # 2 of 2 documents: a perfect sweep is still p = 0.5, not a clear win
    v = bench.verdict(cells(chowliu=[1, 1], dfs=[0, 0]))
    assert v["best"] == "chowliu" and not v["clear"]
    assert v["chowliu_minus"]["dfs"]["mcnemar_p"] == 0.5
    # 10 documents where only chowliu is right, 10 where both are: p = 2 / 2**10
    a, b = [1] * 20, [0] * 10 + [1] * 10
    v = bench.verdict(cells(chowliu=a, dfs=b, dense=b))
    assert v["clear"] and v["chowliu_minus"]["dense"]["mcnemar_p"] == pytest.approx(
        2 / 1024, abs=1e-4
    )
    assert v["chowliu_minus"]["dfs"]["points"] == 50.0
    # one ordering not separated: not clear; a tie names both
    assert not bench.verdict(cells(chowliu=a, dfs=b, dense=[1] * 19 + [0]))["clear"]
    assert bench.verdict(cells(chowliu=b, dfs=b))["best"] == ["chowliu", "dfs"]
    assert bench.paired_diff([1, 0, 1], [1, 0, 1])["mcnemar_p"] == 1.0
