"""Issue #47 items 6 and 14 in `chunkwise eval`: numeric config fields are checked with the
config, before any model call (``--seed -1`` used to fail at scoring, after every prediction was
written, and then refuse the corrected rerun); ``--strategy-args window=N`` works end to end."""

from __future__ import annotations

import json

import pytest

from chunkwise import cli
from chunkwise.errors import BadInput
from chunkwise.eval.config import MAX_SEED, EvalConfig


@pytest.fixture
def main(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", {"eval": "evaluate"})
    return cli.main


@pytest.fixture
def no_model(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the model was loaded before the config was checked")

    monkeypatch.setattr("chunkwise.llm.load_llm", refuse)


def argv(out, *extra, n=3):
    return [
        "eval",
        "--model=scripted:passkey",
        "--tasks=passkey",
        "--data=synthetic:400",
        f"--limit={n}",
        f"--output={out}",
        "--no-progress",
        *extra,
    ]


BAD_NUMBERS = [
    ("seed", -1, "option seed=-1 is not valid; expected a whole number (from 0 to"),
    ("seed", MAX_SEED + 1, "expected a whole number (from 0 to"),
    ("seed", True, "option seed=True is not valid"),
    ("seed", 1.5, "option seed=1.5 is not valid"),
    ("wandb_step", -1, "expected a whole number of steps (0 or more)"),
    (
        "context_window",
        0,
        "option context_window=0 is not valid; expected a whole number of tokens",
    ),
    ("context_window", True, "expected a whole number of tokens"),
    ("parallel", 0, "expected a whole number of examples (1 or more)"),
    ("limit", 0, "option limit=0 is not valid; expected a whole number of examples (at least 1)"),
]


@pytest.mark.parametrize(("key", "value", "why"), BAD_NUMBERS)
def test_bad_numbers_are_refused_with_the_config(key, value, why):
    with pytest.raises(BadInput) as e:
        EvalConfig(**{key: value}).resolved()
    assert why in str(e.value) and repr(value) in str(e.value)


def test_seed_edges_are_accepted():
    assert EvalConfig(seed=0).resolved().seed == 0
    assert EvalConfig(seed=MAX_SEED).resolved().seed == MAX_SEED


def test_negative_seed_fails_before_the_model_and_leaves_nothing(
    main, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "run"
    with monkeypatch.context() as m:
        m.setattr("chunkwise.llm.load_llm", lambda *a, **k: pytest.fail("model loaded"))
        assert main(argv(out, "--seed", "-1")) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert "--seed: option seed='-1' is not valid; expected a whole number (from 0 to" in err
    assert not out.exists()
    # the corrected command runs in the same folder (no config.yaml from the refused one)
    assert main(argv(out, "--seed", "0")) == 0
    assert json.loads((out / "results.json").read_text())["results"]["passkey"]["n"] == 3


def test_negative_seed_in_a_recipe_fails_before_the_model(main, tmp_path, capsys, no_model):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"seed: -5\nmodel: scripted:passkey\noutput: {tmp_path / 'run'}\n")
    assert main(["eval", "--config", str(recipe)]) == 2
    assert f"{recipe}:1: option seed=-5 is not valid; expected a whole number (from 0" in (
        capsys.readouterr().err
    )


def test_window_among_strategy_args_works_end_to_end(main, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(argv(out, "--strategy-args", "window=100")) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["model"]["strategy_window"] == 100
    assert results["results"]["passkey"]["n"] == 3
    assert "context_window: 100" in (out / "config.yaml").read_text()
    # both spellings make the same run: resuming with --context-window is not a new config
    capsys.readouterr()
    assert main(argv(out, "--context-window", "100")) == 0


@pytest.mark.parametrize(
    "options", ["window=300", "window=300,max_collapse_rounds=2", "window=300,embedder=hashing"]
)
def test_window_among_strategy_args_under_other_strategies(main, tmp_path, options):
    strategy = {"window": "standard", "max_collapse_rounds": "mapreduce", "embedder": "retrieval"}
    name = strategy[options.split(",")[-1].split("=")[0]]
    out = tmp_path / "run"
    assert main(argv(out, "--strategy", name, "--strategy-args", options)) == 0
    assert json.loads((out / "results.json").read_text())["model"]["strategy_window"] == 300


@pytest.mark.parametrize(
    ("extra", "why"),
    [
        (["--strategy-args", "window=abc"], "option window='abc' is not valid; expected a whole"),
        (["--strategy-args", "window=100", "--context-window", "200"], "given twice"),
        (["--strategy-args", "window=0"], "option context_window=0 is not valid; expected a whole"),
        (["--strategy-args", "temperature=warm"], "option temperature='warm'"),
    ],
)
def test_bad_window_texts_exit_2_before_the_model(main, tmp_path, capsys, no_model, extra, why):
    out = tmp_path / "run"
    assert main(argv(out, *extra)) == 2
    err = capsys.readouterr().err
    assert why in err and "Traceback" not in err
    assert not out.exists()
