"""bench/mapreduce_vs_standard.py on the scripted passkey reader: middle truncation loses the
needles that mapreduce finds, the ledger keeps finished cells across a crash, the goals are
judged from the cells, and the Wilson interval it reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_loader import load_bench
from chunkwise.stats import wilson_interval as wilson

MODEL = "scripted:passkey?ctx=4096"


@pytest.fixture(scope="module")
def bench():
    return load_bench("mapreduce_vs_standard")


def _argv(out: Path, *more: str) -> list[str]:
    return ["--model", MODEL, "--lengths", "3000", "--n", "3", "--window", "1024",
            "--runs", "b,c", "--out", str(out), *more]  # fmt: skip


def test_truncation_misses_middle_needles_that_mapreduce_finds(bench, tmp_path, capsys):
    out = bench.main(_argv(tmp_path))
    cells = out["models"][MODEL]["lengths"]["3000"]
    assert cells["b"]["correct"] == 0 and cells["b"]["n"] == 3
    assert cells["c"]["correct"] == 3
    assert cells["c"]["ci95"] == [round(v, 1) for v in wilson(3, 3)]
    assert cells["c"]["over_floor"] > 0 and cells["c"]["floor_s"] > 0
    goals = out["goals"]
    assert goals[f"mapreduce_accuracy_3000[{MODEL}]"]["met"] is True
    assert goals[f"standard_8k_misses_3000[{MODEL}]"]["met"] is True
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["goals"] == goals
    assert "| 3000 | c mapreduce@1024 | 100 [44, 100] (3) |" in (tmp_path / "table.md").read_text()


def test_a_rerun_reuses_finished_cells_and_redoes_a_cut_one(bench, tmp_path, monkeypatch):
    bench.main(_argv(tmp_path))
    ledger = tmp_path / "cells.jsonl"
    lines = ledger.read_text().splitlines()
    assert len(lines) == 3  # the prefill rates, cell b, cell c
    # a crash cut the last cell's line: the rerun runs that cell alone
    ledger.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][:40])
    ran = []
    real = bench.run_cell
    monkeypatch.setattr(bench, "run_cell", lambda llm, task, recs, name, w: ran.append(name)
                        or real(llm, task, recs, name, w))  # fmt: skip
    out = bench.main(_argv(tmp_path))
    assert ran == ["mapreduce"]
    assert out["models"][MODEL]["lengths"]["3000"]["c"]["correct"] == 3
    ran.clear()
    bench.main(_argv(tmp_path))
    assert ran == []


def test_counts_per_length_and_skipped_cells(bench, tmp_path):
    argv = ["--model", f"{MODEL},scripted:echo?ctx=4096", "--lengths", "2000,3000",
            "--n", "1,2", "--window", "1024", "--runs", "c", "--out", str(tmp_path),
            "--skip", "scripted:echo?ctx=4096@3000"]  # fmt: skip
    out = bench.main(argv)
    mine = out["models"][MODEL]["lengths"]
    assert (mine["2000"]["c"]["n"], mine["3000"]["c"]["n"]) == (1, 2)
    assert list(out["models"]["scripted:echo?ctx=4096"]["lengths"]) == ["2000"]
    assert list(out["mapreduce_wall_ratio"]) == [f"scripted:echo?ctx=4096/{MODEL}@2000"]


def test_goals_judge_the_vllm_targets_from_the_cells(bench):
    def res(wall: float, over: float, acc: float) -> dict:
        cell = {"wall_s": wall, "over_floor": over, "accuracy": acc, "n": 4, "ci95": [0, 100]}
        return {"lengths": {"32000": {"c": cell}}}

    g = bench.goals({"hf:default": res(100, 1.5, 100), "vllm:default": res(50, 1.2, 75)}, [32000])
    assert g["vllm_mapreduce_32k_over_floor"] == {"value": 1.2, "target": "<= 1.3", "met": True}
    assert g["vllm_over_hf_mapreduce_wall_32k"]["value"] == 0.5
    assert g["vllm_over_hf_mapreduce_wall_32k"]["met"] is True
    assert g["mapreduce_accuracy_32000[vllm:default]"]["met"] is False
    g = bench.goals({"hf:default": res(100, 1.5, 100), "vllm:default": res(70, 1.4, 100)}, [32000])
    assert not g["vllm_mapreduce_32k_over_floor"]["met"]
    assert not g["vllm_over_hf_mapreduce_wall_32k"]["met"]


def test_bad_arguments_are_refused(bench, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    for argv in (_argv(f), _argv(tmp_path / "o", "--runs", "b,x"), _argv(tmp_path, "--n", "0"),
                 _argv(tmp_path, "--n", "1,2"), _argv(tmp_path, "--n", "two")):  # fmt: skip
        with pytest.raises(SystemExit) as e:
            bench.main(argv)
        assert e.value.code == 2


def test_a_bad_model_or_a_broken_ledger_is_said_not_raised(bench, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--model", "bogus:x", "--lengths", "100", "--out", str(tmp_path / "a")])
    assert e.value.code == 2 and "bogus:x" in capsys.readouterr().err
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "cells.jsonl").write_text('{"key": "a"}\n{cut\n{"key": "b"}\n')
    with pytest.raises(SystemExit) as e:
        bench.main(_argv(tmp_path / "b"))
    assert e.value.code == 2 and "cells.jsonl:2" in capsys.readouterr().err


def test_wilson_interval():
    lo, hi = wilson(5, 5)
    assert (round(lo, 1), hi) == (56.6, 100.0)
    lo, hi = wilson(50, 100)
    assert round(lo, 1) == 40.4 and round(hi, 1) == 59.6
    assert wilson(0, 0) == (0.0, 100.0)
    with pytest.raises(ValueError):
        wilson(3, 2)


def test_real_text_task_asks_a_base_model_to_continue_an_answer_prefix(bench):
    task = bench.TASKS["niah_single_2"]()
    (rec,) = bench.documents(task, 600, 1, 0, lambda t: len(t.split()))
    base, chat = task.query(rec, False), task.query(rec, True)
    assert base.answer_prefix.startswith("The special magic number") and not chat.answer_prefix
    assert rec["answer"][0] in rec["context"]
    assert task.correct(f"{base.answer_prefix} {rec['answer'][0]}.", rec)
    assert not task.correct("What is the special magic number?", rec)
