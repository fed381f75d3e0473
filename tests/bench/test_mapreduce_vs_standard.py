"""bench/mapreduce_vs_standard.py on the scripted passkey reader: middle truncation loses the
needles that mapreduce finds, every cell is an eval run folder that a rerun reads or resumes,
and the Wilson interval it reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_loader import load_bench
from chunkwise.stats import wilson_interval

MODEL = "scripted:passkey?ctx=4096"


@pytest.fixture(scope="module")
def bench():
    return load_bench("mapreduce_vs_standard")


def _argv(out: Path, *more: str) -> list[str]:
    return ["--model", MODEL, "--lengths", "3000", "--n", "3", "--window", "1024",
            "--runs", "b,c", "--out", str(out), *more]  # fmt: skip


def test_truncation_misses_middle_needles_that_mapreduce_finds(bench, tmp_path):
    out = bench.main(_argv(tmp_path))
    cells = out["models"][MODEL]["lengths"]["3000"]
    assert cells["b"]["correct"] == 0 and cells["b"]["n"] == 3
    assert cells["c"]["correct"] == 3 and cells["c"]["interval"] == "wilson"
    assert cells["c"]["ci95"] == [round(v, 2) for v in wilson_interval(3, 3)]
    assert cells["c"]["over_floor"] > 0 and cells["c"]["floor_s"] > 0
    assert "goals" not in out  # it prints what it measured; the targets live in the issue
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["models"] == json.loads(json.dumps(out["models"]))
    assert "| 3000 | c mapreduce@1024 | 100 [44, 100] (3) |" in (tmp_path / "table.md").read_text()
    # each cell is a `chunkwise eval` run on the bench's documents
    run = Path(cells["c"]["run_dir"])
    assert run == tmp_path / "scripted_passkey_ctx=4096" / "passkey-3000-n3-seed0" / "c-w1024"
    results = json.loads((run / "results.json").read_text())
    assert (
        results["benchmark"]["name"] == "infinitebench" and results["results"]["passkey"]["n"] == 3
    )
    assert (
        results["config"]["strategy"] == "mapreduce" and results["config"]["context_window"] == 1024
    )


def test_a_rerun_reads_finished_cells_and_resumes_a_cut_one(bench, tmp_path, monkeypatch):
    first = bench.main(_argv(tmp_path))
    run = Path(first["models"][MODEL]["lengths"]["3000"]["c"]["run_dir"])
    # a crash in cell c, in the middle of writing its second prediction
    (run / "results.json").unlink()
    lines = (run / "predictions" / "passkey.jsonl").read_text().splitlines()
    (run / "predictions" / "passkey.jsonl").write_text(lines[0] + "\n" + lines[1][:40])
    import chunkwise.eval.runner as runner

    ran = []
    real = runner.run_eval
    monkeypatch.setattr(
        runner, "run_eval", lambda cfg, **kw: ran.append(cfg.strategy) or real(cfg, **kw)
    )
    again = bench.main(_argv(tmp_path))
    assert ran == ["mapreduce"]
    assert again["models"][MODEL]["lengths"]["3000"]["c"]["correct"] == 3
    assert len((run / "predictions" / "passkey.jsonl").read_text().splitlines()) == 3
    ran.clear()

    def no_model(spec):
        raise AssertionError("every cell is finished: no model is needed")

    monkeypatch.setattr(bench, "load_llm", no_model)
    third = bench.main(_argv(tmp_path))
    assert ran == [] and third["models"] == again["models"]


def test_counts_per_length_and_skipped_cells(bench, tmp_path):
    argv = ["--model", f"{MODEL},scripted:echo?ctx=4096", "--lengths", "2000,3000",
            "--n", "1,2", "--window", "1024", "--runs", "c", "--out", str(tmp_path),
            "--skip", "scripted:echo?ctx=4096@3000"]  # fmt: skip
    out = bench.main(argv)
    mine = out["models"][MODEL]["lengths"]
    assert (mine["2000"]["c"]["n"], mine["3000"]["c"]["n"]) == (1, 2)
    assert list(out["models"]["scripted:echo?ctx=4096"]["lengths"]) == ["2000"]
    assert list(out["mapreduce_wall_ratio"]) == [f"scripted:echo?ctx=4096/{MODEL}@2000"]


def test_bad_arguments_are_refused(bench, tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    for argv in (_argv(f), _argv(tmp_path / "o", "--runs", "b,x"), _argv(tmp_path, "--n", "0"),
                 _argv(tmp_path, "--n", "1,2"), _argv(tmp_path, "--n", "two")):  # fmt: skip
        with pytest.raises(SystemExit) as e:
            bench.main(argv)
        assert e.value.code == 2


def test_a_bad_model_or_a_damaged_file_is_said_not_raised(bench, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--model", "bogus:x", "--lengths", "100", "--out", str(tmp_path / "a")])
    assert e.value.code == 2 and "bogus:x" in capsys.readouterr().err
    rates = tmp_path / "b" / "scripted_passkey_ctx=4096" / "prefill.json"
    rates.parent.mkdir(parents=True)
    rates.write_text('{"rates": {"single": 1')
    with pytest.raises(SystemExit) as e:
        bench.main(_argv(tmp_path / "b"))
    assert e.value.code == 2 and "prefill.json" in capsys.readouterr().err


def test_real_text_task_is_the_ruler_benchmark_with_its_answer_prefix(bench, tmp_path):
    argv = ["--model", "scripted:echo?ctx=4096", "--task", "niah_single_2", "--lengths", "600",
            "--n", "1", "--window", "1024", "--runs", "b", "--out", str(tmp_path)]  # fmt: skip
    cell = bench.main(argv)["models"]["scripted:echo?ctx=4096"]["lengths"]["600"]["b"]
    run = Path(cell["run_dir"])
    assert json.loads((run / "results.json").read_text())["benchmark"]["name"] == "ruler"
    (sample,) = [json.loads(x) for x in (run / "samples" / "niah_single_2.jsonl").open()]
    # a base model is asked to continue RULER's answer prefix
    assert "The special magic number" in json.dumps(sample["prompt"])
    assert sample["ground_truth"][0] in (run.parent / "data" / "niah_single_2.jsonl").read_text()
