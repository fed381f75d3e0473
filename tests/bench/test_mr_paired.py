"""bench/mr_paired.py on a ledger written with bench/mr_trained.py's own keys."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from chunkwise.experiments.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]


def _write(
    path: Path,
    per_model: dict[str, list[float]],
    *,
    as_cells: bool = False,
    seed: int = 0,
    cell: str = "multihop@800",
) -> None:
    """One cell (multihop@800) per model, its documents one row each (or one finished cell)."""
    from bench_loader import load_bench

    bench = load_bench("mr_trained")
    args = argparse.Namespace(n=len(next(iter(per_model.values()))), seed=seed)
    with Ledger(path) as ledger:
        for model, scores in per_model.items():
            arm = {"name": "mr/mapreduce", "model": model, "strategy": "mapreduce",
                   "opts": {}, "window": 4096}  # fmt: skip
            key = bench._ledger_key(arm, cell, args)
            if as_cells:
                ledger.put(key, {"arm": arm["name"], "cell": cell, "scores": scores})
                continue
            for i, s in enumerate(scores):
                ledger.put(bench._doc_key(key, i), {"doc": i, "score": s, "prediction": ""})


def test_the_difference_is_paired_by_document(tmp_path):
    paired = pytest.importorskip("bench_loader").load_bench("mr_paired")
    a = [0.0, 1.0] * 10
    b = list(a)
    for i in (0, 2, 4, 6):  # b gains four documents and loses none
        b[i] = 1.0
    _write(tmp_path / "cells.jsonl", {"scripted:passkey": a, "scripted:number_string": b})
    out = paired.compare(tmp_path / "cells.jsonl", "passkey", "number_string")
    (cell,) = out["cells"]
    assert (cell["n"], cell["a"], cell["b"], cell["b_minus_a"]) == (20, 50.0, 70.0, 20.0)
    lo, hi = cell["ci95"]
    # paired, the gain is clear; the two accuracies' own intervals (about +-22) overlap
    assert 0 < lo < 20 < hi <= 40


def test_only_documents_both_answered_count_and_finished_cells_are_read(tmp_path):
    paired = pytest.importorskip("bench_loader").load_bench("mr_paired")
    _write(tmp_path / "cells.jsonl", {"scripted:passkey": [1.0, 0.0, 1.0, 1.0]}, as_cells=True)
    _write(tmp_path / "cells.jsonl", {"scripted:number_string": [1.0, 1.0]})
    (cell,) = paired.compare(tmp_path / "cells.jsonl", "passkey", "number_string")["cells"]
    assert (cell["n"], cell["a"], cell["b"], cell["b_minus_a"]) == (2, 50.0, 100.0, 50.0)


def test_cli_writes_json_and_table_and_rejects_an_ambiguous_model(tmp_path):
    _write(tmp_path / "cells.jsonl", {"scripted:passkey": [1.0, 0.0], "scripted:kv": [1.0, 1.0]})
    cmd = [sys.executable, str(ROOT / "bench" / "mr_paired.py"), str(tmp_path)]
    done = subprocess.run(
        [*cmd, "--a", "passkey", "--b", "kv", "--out", str(tmp_path / "cmp")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout.splitlines()[0])["cells"][0]["b_minus_a"] == 50.0
    assert "| mr/mapreduce | multihop@800 | 2 | 50.0 | 100.0 | +50.0 [" in done.stdout
    assert json.loads((tmp_path / "cmp" / "paired.json").read_text())["b"] == "scripted:kv"
    bad = subprocess.run([*cmd, "--a", "scripted", "--b", "kv"], capture_output=True, text=True)
    assert bad.returncode != 0 and "matches 2 models" in bad.stderr


def test_documents_of_another_generator_are_never_paired(tmp_path):
    """The same cell name over other documents (another seed here; a changed generator gives
    another fingerprint the same way) is its own cell: model a's old documents must not be
    paired with model b's new ones by index."""
    paired = pytest.importorskip("bench_loader").load_bench("mr_paired")
    ledger = tmp_path / "cells.jsonl"
    _write(ledger, {"scripted:passkey": [1.0, 1.0, 1.0, 1.0]}, seed=0)
    _write(ledger, {"scripted:passkey": [0.0, 0.0, 1.0, 1.0]}, seed=1)
    _write(ledger, {"scripted:number_string": [0.0, 1.0, 1.0, 1.0]}, seed=1)
    (cell,) = paired.compare(ledger, "passkey", "number_string")["cells"]
    assert (cell["n"], cell["a"], cell["b"], cell["b_minus_a"]) == (4, 50.0, 75.0, 25.0)
    _write(ledger, {"scripted:number_string": [1.0, 1.0, 1.0, 1.0]}, seed=0)
    out = paired.compare(ledger, "passkey", "number_string")
    assert sorted(c["b_minus_a"] for c in out["cells"]) == [0.0, 25.0]
    assert paired.table(out).count("(documents ") == 2  # the two rows are told apart


def test_seeds_agree_unless_one_pair_differs_beyond_noise(tmp_path):
    """--models: a cell agrees when every pair's paired interval holds 0; one seed that loses
    a skill on many documents makes the recipe not reproducible, and the table says where."""
    paired = pytest.importorskip("bench_loader").load_bench("mr_paired")
    base = [1.0, 0.0] * 15
    near = list(base)
    near[1] = 1.0  # one document apart: noise
    far = [0.0] * 30  # loses all 15 right answers
    ledger = tmp_path / "cells.jsonl"
    _write(ledger, {"scripted:s0": base, "scripted:s1": near})
    out = paired.agreement(ledger, ["s0", "s1"])
    (cell,) = out["cells"]
    assert (cell["n"], cell["accuracy"], cell["agree"]) == (30, [50.0, 53.33], True)
    assert out["reproducible"] and out["disagree"] == []
    _write(ledger, {"scripted:s2": far})
    out = paired.agreement(ledger, ["s0", "s1", "s2"])
    (cell,) = out["cells"]
    assert cell["accuracy"] == [50.0, 53.33, 0.0] and len(cell["pairs"]) == 3
    assert (cell["worst"]["a"], cell["worst"]["b"], cell["worst"]["b_minus_a"]) == (1, 2, -53.33)
    assert cell["worst"]["ci"][1] < 0 and not cell["agree"]
    assert not out["reproducible"] and out["disagree"] == ["mr/mapreduce multihop@800"]
    md = paired.agreement_table(out)
    assert "| 2 - 1: -53.3 [" in md and "| **no** |" in md and "**no**\n" in md
    # a looser level widens every interval: 99.99% still excludes 0 for a loss this large
    assert not paired.agreement(ledger, ["s0", "s1", "s2"], level=99.99)["reproducible"]


def test_the_verdict_over_many_cells_is_held_to_its_level_not_each_interval(tmp_path):
    """Eight cells of two seeds: one seed gains 4 of 50 documents on one cell and loses none.
    Its unadjusted 95% interval misses 0 (about one cell in twenty does by chance alone); the
    Bonferroni-widened one (99.375% for 8 comparisons) holds it, so the verdict stays yes and
    the near miss is still named. A seed losing all 25 right answers fails either way."""
    paired = pytest.importorskip("bench_loader").load_bench("mr_paired")
    ledger = tmp_path / "cells.jsonl"
    same = [1.0, 0.0] * 25
    gain = list(same)
    for i in (1, 3, 5, 7):
        gain[i] = 1.0
    for k in range(8):
        cell = f"passkey@{1000 + k}"
        _write(ledger, {"scripted:s0": same, "scripted:s1": gain if k == 3 else same}, cell=cell)
    out = paired.agreement(ledger, ["s0", "s1"])
    assert (out["comparisons"], out["pair_level"], out["correction"]) == (8, 99.375, "bonferroni")
    near = next(c for c in out["cells"] if c["cell"] == "passkey@1003")
    assert near["pairs"][0]["ci_nominal"][0] > 0 and near["pairs"][0]["ci"][0] <= 0
    assert out["reproducible"] and out["disagree"] == []
    assert out["disagree_nominal"] == ["mr/mapreduce passkey@1003"]
    md = paired.agreement_table(out)
    assert "each at 99.375%): **yes**" in md and "misses 0: mr/mapreduce passkey@1003" in md
    unadjusted = paired.agreement(ledger, ["s0", "s1"], correction="none")
    assert unadjusted["pair_level"] == 95.0 and not unadjusted["reproducible"]
    assert unadjusted["disagree"] == ["mr/mapreduce passkey@1003"]
    _write(ledger, {"scripted:s2": [0.0] * 50}, cell="passkey@1000")
    lost = paired.agreement(ledger, ["s0", "s2"])
    assert lost["disagree"] == ["mr/mapreduce passkey@1000"] and not lost["reproducible"]


def test_seeds_compare_only_documents_all_answered(tmp_path):
    paired = pytest.importorskip("bench_loader").load_bench("mr_paired")
    ledger = tmp_path / "cells.jsonl"
    _write(ledger, {"scripted:s0": [1.0, 1.0, 0.0, 0.0], "scripted:s1": [1.0, 1.0, 0.0]})
    _write(ledger, {"scripted:s2": [1.0, 0.0]})
    (cell,) = paired.agreement(ledger, ["s0", "s1", "s2"])["cells"]
    assert (cell["n"], cell["accuracy"]) == (2, [100.0, 100.0, 50.0])


def test_seeds_cli_writes_agreement_and_rejects_bad_requests(tmp_path):
    _write(tmp_path / "cells.jsonl", {"scripted:s0": [1.0, 0.0], "scripted:s1": [1.0, 0.0]})
    cmd = [sys.executable, str(ROOT / "bench" / "mr_paired.py"), str(tmp_path)]
    done = subprocess.run(
        [*cmd, "--models", "s0", "s1", "--out", str(tmp_path / "agree")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert json.loads(done.stdout.splitlines()[0])["reproducible"] is True
    assert "reproducible within noise (95% paired intervals): **yes**" in done.stdout
    assert json.loads((tmp_path / "agree" / "agreement.json").read_text())["cells"][0]["agree"]
    for bad, says in [
        (["--models", "s0"], "two models or more"),
        (["--models", "s0", "scripted:s0"], "one model twice"),
        (["--models", "s0", "s1", "--a", "s0"], "give --a and --b, or --models"),
        (["--a", "s0"], "give --a and --b, or --models"),
        (["--models", "s0", "s1", "--level", "100"], "between 0 and 100"),
        (["--models", "s0", "s1", "--correction", "holm"], "invalid choice"),
    ]:
        run = subprocess.run([*cmd, *bad], capture_output=True, text=True)
        assert run.returncode != 0 and says in run.stderr, (bad, run.stderr)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "cells.jsonl").write_text("")
    (tmp_path / "bad.jsonl").write_text('{"key": "x"\n')
    for ledger, says in [
        (tmp_path / "empty", "holds no answered document"),
        (tmp_path / "bad.jsonl", "holds no answered document"),  # its cut line skipped
        (tmp_path / "nope", "no ledger at"),
    ]:
        bad = [sys.executable, str(ROOT / "bench" / "mr_paired.py"), str(ledger)]
        run = subprocess.run([*bad, "--models", "s0", "s1"], capture_output=True, text=True)
        assert run.returncode != 0 and says in run.stderr and ledger.name in run.stderr


def _write_opts(path: Path, model: str, scores: list[float], opts: dict) -> None:
    """One model's multihop@800 documents, answered under strategy options ``opts``."""
    from bench_loader import load_bench

    bench = load_bench("mr_trained")
    args = argparse.Namespace(n=len(scores), seed=0)
    arm = {"name": "mr/mapreduce", "model": model, "strategy": "mapreduce", "opts": opts,
           "window": 4096}  # fmt: skip
    key = bench._ledger_key(arm, "multihop@800", args)
    with Ledger(path) as ledger:
        for i, s in enumerate(scores):
            ledger.put(bench._doc_key(key, i), {"doc": i, "score": s, "prediction": ""})


def test_a_cell_rebenched_under_new_options_supersedes_the_old_rows(tmp_path):
    """One adapter's cell answered again with a decoding check on: its new scores are read,
    never mixed document by document with the old ones; models whose latest scores of a cell
    come from different options are not compared on it."""
    paired = pytest.importorskip("bench_loader").load_bench("mr_paired")
    ledger = tmp_path / "cells.jsonl"
    _write_opts(ledger, "scripted:passkey", [0.0, 0.0, 0.0, 0.0], {})
    _write_opts(ledger, "scripted:kv", [0.0, 0.0, 0.0, 0.0], {})
    _write_opts(ledger, "scripted:passkey", [1.0, 1.0, 0.0], {"anchor_quotes": True})
    scores = paired.doc_scores(ledger)
    (key,) = [k for k in scores if k[1] == "scripted:passkey"]
    assert scores[key] == {0: 1.0, 1: 1.0, 2: 0.0}  # the old document 3 is not carried over
    out = paired.agreement(ledger, ["passkey", "kv"])
    assert (out["cells"], out["options_differ"]) == ([], ["mr/mapreduce multihop@800"])
    assert "not compared (answered under different options)" in paired.agreement_table(out)
    assert paired.compare(ledger, "passkey", "kv")["options_differ"] == [
        "mr/mapreduce multihop@800"
    ]
    _write_opts(ledger, "scripted:kv", [1.0, 0.0, 0.0, 1.0], {"anchor_quotes": True})
    (cell,) = paired.compare(ledger, "passkey", "kv")["cells"]
    assert (cell["n"], cell["a"], cell["b"]) == (3, 66.67, 33.33)
