"""Answers with digit runs past Python's 4,300-digit ``int()`` limit are scored, never crash:
the numbers helpers, the rules (math_calc, math_find, code_run), gold answers written as long
text, a predictions file, and a `chunkwise eval` run (and its rerun) whose model writes one."""

from __future__ import annotations

import json
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chunkwise import cli
from chunkwise.benchmarks.infinitebench.metrics import (
    normalize_label,
    score_one,
    score_predictions_file,
)
from chunkwise.benchmarks.infinitebench.numbers import decimal, int_text, parse_int
from chunkwise.eval.runner import EvalConfig, run_eval
from chunkwise.llm.scripted import ScriptedLLM

LIMIT = sys.get_int_max_str_digits()
LONG = "7" * (LIMIT + 700)  # one digit run int() refuses


@pytest.fixture
def unlimited():
    """int()/str() without the digit limit, to compute the expected values (restored after)."""
    sys.set_int_max_str_digits(0)
    yield
    sys.set_int_max_str_digits(LIMIT)


def test_the_limit_is_real():
    with pytest.raises(ValueError):
        int(LONG)


# --------------------------------------------------------------------------------------------
# the helpers agree with int() and str() where those work, and keep working past the limit

_INT_ALPHABET = st.sampled_from([*"0123456789_+- \t\n", "٣", "０", "x", "."])


@given(st.text(_INT_ALPHABET, max_size=12))
def test_int_text_is_int_as_text(text):
    try:
        want = str(int(text))
    except ValueError:
        want = None
    assert int_text(text) == want
    assert parse_int(text) == (None if want is None else int(want))


@given(st.integers(min_value=-(10**1200), max_value=10**1200))
def test_decimal_is_str(n):
    assert decimal(n) == str(n)


def test_past_the_limit(unlimited):
    text = "-00" + "9" * 3000 + "_" + "1" * 3000
    value = parse_int(text)
    assert value == int(text)
    assert decimal(value) == str(value) == int_text(text)
    assert decimal(10 ** (LIMIT + 5)) == "1" + "0" * (LIMIT + 5)


# --------------------------------------------------------------------------------------------
# the rules


def test_math_calc_scores_a_long_run():
    # the long run stands where the second value belongs: one of three matched, no crash
    assert score_one("math_calc", f"3 {LONG} 5", [3, 4, 5]) == pytest.approx(1 / 3)
    assert score_one("math_calc", f"3 {LONG} 5", [3, 4, 5], "lenient") == pytest.approx(1 / 3)
    assert score_one("math_calc", f"{LONG} 3 4", [3, 4], model_name="gpt4") == 1.0
    # a long run of zeros before a digit is that digit, as int() reads it
    assert score_one("math_calc", "0" * (LIMIT + 10) + "8 9", [8, 9]) == 1.0


def test_math_calc_long_gold_values_match_their_digits():
    gold = normalize_label("math_calc", [LONG, "12"])
    assert score_one("math_calc", f"{LONG}, 12", gold) == 1.0
    assert score_one("math_calc", f"{LONG}8, 12", gold) == 0.0


def test_math_find_scores_a_long_number():
    assert score_one("math_find", f"It is {LONG}.", 7) == 0.0
    assert score_one("math_find", f"It is {LONG}.", LONG) == 1.0  # the gold, written as text
    assert score_one("math_find", f"It is {LONG}.5", 2.5) == 0.0  # float() has no limit
    assert score_one("math_find", "0" * (LIMIT + 10) + "42", 42) == 1.0


def test_code_run_scores_a_long_number():
    assert score_one("code_run", f"The output is {LONG}", 7) == 0.0
    assert score_one("code_run", f"The output is {LONG}", LONG) == 1.0
    assert score_one("code_run", "The output is " + "0" * (LIMIT + 10) + "7", 7) == 1.0
    assert score_one("code_run", "The output is 7.5", 7) == 0.0


def test_long_gold_answers_are_read(unlimited):
    assert normalize_label("math_find", LONG) == int(LONG)
    assert normalize_label("code_run", [" " + LONG + " "]) == int(LONG)
    assert normalize_label("math_calc", [LONG, 1]) == [int(LONG), 1]
    assert normalize_label("passkey", int(LONG)) == LONG


def test_a_bad_long_gold_answer_is_named_briefly():
    from chunkwise.errors import BadInput

    with pytest.raises(BadInput, match=r"code_run: answer '7+\.\.\.7+x' \(\d+ characters\)") as e:
        normalize_label("code_run", LONG + "x")
    assert len(str(e.value)) < 200


def test_predictions_file_with_a_long_run(tmp_path):
    f = tmp_path / "math_calc.jsonl"
    rows = [
        {"id": 0, "prediction": f"3 {LONG}", "ground_truth": [3, 4]},
        {"id": 1, "prediction": "3 4", "ground_truth": [3, 4]},
    ]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    for skip in (False, True):
        got = score_predictions_file("math_calc", f, skip_bad_lines=skip)
        assert (got["score"], got["n"], got["skipped"]) == (75.0, 2, 0)


# --------------------------------------------------------------------------------------------
# under `chunkwise eval`: the prediction is saved before it is scored, so a crash in scoring
# used to make every rerun die in finish() before results.json was written


def _math_calc_data(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rows = [
        {"id": i, "context": "1 + 2, then + 3", "input": "", "answer": [[3, 6]], "options": []}
        for i in range(2)
    ]
    (data / "math_calc.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8"
    )
    return data


def test_eval_and_its_rerun_score_a_long_answer(tmp_path):
    cfg = EvalConfig(
        model="scripted:long",
        tasks=["math_calc"],
        data=str(_math_calc_data(tmp_path)),
        output=str(tmp_path / "run"),
    )
    res = run_eval(cfg, llm=ScriptedLLM(default=f"3 {LONG}"), progress=False)
    assert res["results"]["math_calc"]["score"] == 50.0  # 3 matched, then the long run
    preds = (tmp_path / "run" / "predictions" / "math_calc.jsonl").read_text().splitlines()
    assert [json.loads(p)["prediction"] for p in preds] == [f"3 {LONG}"] * 2
    # the rerun (every prediction there) scores again, also with another scorer
    again = run_eval(cfg, llm=ScriptedLLM(default="unused"), progress=False)
    assert again["results"]["math_calc"]["score"] == 50.0
    assert (tmp_path / "run" / "results.json").is_file()


def test_eval_cli_with_a_long_answer_exits_0(tmp_path, monkeypatch, capsys):
    from chunkwise.llm import scripted

    monkeypatch.setitem(scripted.SCRIPTS, "long", lambda: ScriptedLLM(default=f"{LONG} 6"))
    monkeypatch.setattr(cli, "COMMANDS", {"eval": "evaluate"})
    args = [
        "eval",
        "--model=scripted:long",
        "--tasks=math_calc",
        f"--data={_math_calc_data(tmp_path)}",
        f"--output={tmp_path / 'run'}",
        "--no-progress",
    ]
    for _ in range(2):  # the run, then the rerun that rescores it
        assert cli.main(args) == 0, capsys.readouterr().err
        assert json.loads(capsys.readouterr().out)["scores"] == {"math_calc": 0.0}
