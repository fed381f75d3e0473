"""`chunkwise score` and `chunkwise generate-data` through the CLI's entry point."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys

import pytest

from chunkwise import cli
from chunkwise.commands import generate_data, score
from chunkwise.errors import BadInput


@pytest.fixture
def main(monkeypatch):
    """cli.main restricted to this file's verbs (other command modules may not exist yet)."""
    monkeypatch.setattr(cli, "COMMANDS", {"score": "score", "generate-data": "generate_data"})
    return cli.main


def preds(tmp_path, lines, name="preds.jsonl"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


GOOD = [
    json.dumps({"id": 0, "prediction": "The pass key is 12345.", "ground_truth": ["12345"]}),
    json.dumps({"id": 1, "prediction": "Maybe 777 or 54321", "ground_truth": ["54321"]}),
]


def one_line_error(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def test_score_prints_one_json_line(main, tmp_path, capsys):
    f = preds(tmp_path, GOOD)
    assert main(["score", "--task", "passkey", "--predictions", str(f)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1
    assert json.loads(out[0]) == {"task": "passkey", "scorer": "official", "score": 50.0, "n": 2}
    assert main(["score", "--task", "passkey", "--predictions", str(f), "--scorer", "lenient"]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == 100.0


def test_score_extract_mapreduce(main, tmp_path, capsys):
    raw = "Most chunks point to B at first.\n\nAnswer: C. Snowfield"
    line = {"id": 0, "prediction": raw, "ground_truth": ["Snowfield", "C"]}
    f = preds(tmp_path, [json.dumps(line)])
    args = ["score", "--task", "longbook_choice_eng", "--predictions", str(f)]
    assert main(args) == 0
    # unextracted, the official fallback meets the stray "B" first
    assert json.loads(capsys.readouterr().out)["score"] == 0.0
    assert main([*args, "--extract", "mapreduce"]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == 100.0


def test_score_missing_file(main, tmp_path, capsys):
    missing = tmp_path / "nope.jsonl"
    assert main(["score", "--task", "passkey", "--predictions", str(missing)]) == 2
    msg = one_line_error(capsys.readouterr().err)
    assert msg.startswith("chunkwise score: error:")
    assert str(missing) in msg and "no such file" in msg


def test_score_malformed_line_names_file_and_line(main, tmp_path, capsys):
    f = preds(tmp_path, [GOOD[0], '{"id": 1, "prediction": "1"', GOOD[1]])
    assert main(["score", "--task", "passkey", "--predictions", str(f)]) == 2
    msg = one_line_error(capsys.readouterr().err)
    assert f"{f}:2" in msg
    assert "--skip-bad-lines" in msg
    # skipping reports the count
    assert main(["score", "--task", "passkey", "--predictions", str(f), "--skip-bad-lines"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["n"], out["skipped"]) == (2, 1)


def test_score_unknown_task_and_scorer(main, tmp_path, capsys):
    f = preds(tmp_path, GOOD)
    assert main(["score", "--task", "pass_key", "--predictions", str(f)]) == 2
    msg = one_line_error(capsys.readouterr().err)
    assert "unknown task 'pass_key'" in msg and "kv_retrieval" in msg
    assert main(["score", "--task", "passkey", "--predictions", str(f), "--scorer", "x"]) == 2
    assert "official, lenient" in one_line_error(capsys.readouterr().err)


def test_score_math_calc_model_name(main, tmp_path, capsys):
    f = preds(tmp_path, [json.dumps({"id": 0, "prediction": "[1, 3, 4]", "ground_truth": [3, 4]})])
    assert main(["score", "--task", "math_calc", "--predictions", str(f)]) == 0
    assert json.loads(capsys.readouterr().out)["score"] == 0.0
    assert (
        main(["score", "--task", "math_calc", "--predictions", str(f), "--model-name", "gpt4"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["score"] == 100.0


@pytest.mark.parametrize("task", ["math_calc", "math_find", "code_run"])
def test_score_an_answer_past_the_int_digit_limit(main, tmp_path, capsys, task):
    """A digit run int() refuses (over 4,300 digits) is scored, with or without
    --skip-bad-lines: it used to end in a ValueError traceback."""
    long = "9" * (sys.get_int_max_str_digits() + 100)
    gold = {"math_calc": [5, 6], "math_find": 5, "code_run": 5}[task]
    rows = [
        {"id": 0, "prediction": f"{long} 5 6", "ground_truth": gold},
        {"id": 1, "prediction": "5 6" if task == "math_calc" else "5", "ground_truth": gold},
    ]
    f = preds(tmp_path, [json.dumps(r) for r in rows])
    for extra in ([], ["--skip-bad-lines"]):
        assert main(["score", "--task", task, "--predictions", str(f), *extra]) == 0
        out = json.loads(capsys.readouterr().out)
        assert (out["score"], out["n"]) == (50.0, 2), out


def test_score_auto_scores_a_chunkwise_mapreduce_line_as_eval_does(main, tmp_path, capsys):
    """The default (auto) reads the strategy a chunkwise line names: a mapreduce line whose
    raw reduce text has a Rationale scores on its parsed answer; the reference's processing
    keeps the raw text, whose first integer is the part number."""
    line = {
        "id": 0,
        "prediction": "62070",
        "raw_output": "Rationale: Part 3 states it directly.\nAnswer: 62070",
        "ground_truth": "62070",
        "strategy": "mapreduce",
    }
    f = preds(tmp_path, [json.dumps(line)])
    args = ["score", "--task", "passkey", "--predictions", str(f)]
    for extra, want in (
        ([], 100.0),
        (["--extract", "auto"], 100.0),
        (["--extract", "mapreduce"], 0.0),
    ):
        assert main([*args, *extra]) == 0
        assert json.loads(capsys.readouterr().out)["score"] == want, extra
    assert main([*args, "--extract", "nope"]) == 2
    assert "valid extractors: auto, none, parsed" in one_line_error(capsys.readouterr().err)


def test_score_run_directly(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    score.add_arguments(parser)
    f = preds(tmp_path, [GOOD[0], "not json"])
    args = parser.parse_args(["--task", "passkey", "--predictions", str(f)])
    with pytest.raises(BadInput, match=r"preds\.jsonl:2: not valid JSON"):
        score.run(args)


# --------------------------------------------------------------------------------------------
# generate-data


def test_generate_data_writes_official_records(main, tmp_path, capsys):
    out = tmp_path / "sub" / "passkey.jsonl"
    argv = ["generate-data", "--task", "passkey", "--length", "2000", "--n", "4", "--seed", "3"]
    argv += ["--out", str(out), "--model", "scripted:echo"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["n"] == 4 and summary["out"] == str(out)
    recs = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in recs] == [0, 1, 2, 3]
    assert all(list(r) == ["id", "context", "input", "answer", "options"] for r in recs)
    assert all(r["answer"][0] in r["context"] for r in recs)
    # measured with the model's own tokenizer
    from chunkwise.llm import load_llm

    llm = load_llm("scripted:echo")
    assert all(abs(llm.count_tokens(r["context"]) - 2000) <= 40 for r in recs)
    # no temporary files left beside the output; a rerun replaces it with identical content
    assert [p.name for p in out.parent.iterdir()] == ["passkey.jsonl"]
    before = out.read_bytes()
    assert main(argv) == 0
    assert out.read_bytes() == before
    assert [p.name for p in out.parent.iterdir()] == ["passkey.jsonl"]


def test_generate_data_bad_input(main, tmp_path, capsys):
    base = ["generate-data", "--length", "2000", "--out", str(tmp_path / "x.jsonl")]
    base += ["--model", "scripted:echo"]
    assert main([*base, "--task", "longbook_qa_eng"]) == 2
    assert "available: passkey" in one_line_error(capsys.readouterr().err)
    assert main([*base, "--task", "passkey", "--n", "0"]) == 2
    assert "--n" in one_line_error(capsys.readouterr().err)
    assert not (tmp_path / "x.jsonl").exists()
    assert (
        main(["generate-data", "--task", "passkey", "--length", "100", "--out", str(tmp_path)]) == 2
    )
    assert "is a folder" in one_line_error(capsys.readouterr().err)


def test_real_entry_point_when_all_verbs_exist(tmp_path):
    if "score" not in cli.COMMANDS:
        pytest.skip("the score verb is not registered in chunkwise.cli yet")
    for module in cli.COMMANDS.values():
        try:
            importlib.import_module(f"chunkwise.commands.{module}")
        except ImportError:
            pytest.skip(f"chunkwise.commands.{module} does not exist yet")
    f = preds(tmp_path, [GOOD[0], "{broken"])
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "chunkwise.cli",
            "score",
            "--task",
            "passkey",
            "--predictions",
            str(f),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert f"{f}:2" in one_line_error(proc.stderr)


def test_generate_data_module_contract():
    for module in (score, generate_data):
        assert isinstance(module.HELP, str) and module.HELP
        assert callable(module.add_arguments) and callable(module.run)
