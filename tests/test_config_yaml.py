"""Issue #47 item 12: every YAML read in the package goes through one safe loader
(:func:`chunkwise.config.load_yaml`), which turns a parser's failures (a RecursionError on deep
nesting included) into one :class:`BadInput` line naming the file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chunkwise.config import MAX_YAML_DEPTH, load_config, load_yaml
from chunkwise.errors import BadInput
from chunkwise.eval.config import EvalConfig

SRC = Path(__file__).resolve().parents[1] / "src" / "chunkwise"

#: YAML that no config may hold, and a piece of the message each gives
HOSTILE = {
    "unclosed_deep_list": ("strategy_args: " + "[" * 100_000, "nested too deeply"),
    "closed_deep_list": ("tasks: " + "[" * 5000 + "]" * 5000, "nested too deeply"),
    "deep_block_list": ("- " * 3000 + "x", "nested too deeply"),
    "deep_mapping": ("strategy_args: " + "{a: " * 150 + "1" + "}" * 150, "nested deeper than"),
    "bad_timestamp": ("seed: 2024-13-45", "month must be in 1..12"),
    "alias_cycle": ("tasks: &x [a, *x]", "recursive node"),
    "python_tag": ("model: !!python/object/apply:os.system [echo]", "constructor"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_yaml_config_is_one_clean_error_naming_the_file(tmp_path, name):
    text, why = HOSTILE[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    with pytest.raises(BadInput) as e:
        load_config(EvalConfig, path)
    msg = str(e.value)
    assert str(path) in msg and why in msg and "\n" not in msg


def test_yaml_at_the_depth_limit_still_loads():
    text = "a: " + "[" * (MAX_YAML_DEPTH - 1) + "1" + "]" * (MAX_YAML_DEPTH - 1)
    value = load_yaml(text, "x.yaml")["a"]
    depth = 1
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    assert depth == MAX_YAML_DEPTH and value == 1


def test_shared_anchors_are_cheap_and_not_deep():
    """A "billion laughs" document shares nodes; the depth check walks each once per depth."""
    text = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    assert len(load_yaml(text, "laughs.yaml")) == 9


def test_deep_override_value_is_one_clean_error():
    with pytest.raises(BadInput, match=r"override value '\[\[\[.*nested deeper than"):
        load_config(EvalConfig, None, ["--strategy_args=" + "[" * 50_000])


def test_eval_cli_with_a_deep_config_exits_2_naming_the_file(tmp_path, monkeypatch, capsys):
    from chunkwise import cli

    monkeypatch.setattr(cli, "COMMANDS", {"eval": "evaluate"})
    path = tmp_path / "deep.yaml"
    path.write_text("strategy_args: " + "[" * 100_000)
    assert cli.main(["eval", "--config", str(path), "--output", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(path) in err and "nested too deeply" in err


def test_a_routed_reader_names_its_file(tmp_path):
    """default_mr.install reads a training run's recipe.yaml through the safe loader."""
    from chunkwise.llm import default_mr

    run = tmp_path / "train"
    run.mkdir()
    for name in default_mr.ADAPTER_FILES:
        (run / name).write_text("{}")
    (run / "recipe.yaml").write_text("data: " + "[" * 100_000)
    with pytest.raises(BadInput, match=re.escape(str(run / "recipe.yaml"))):
        default_mr.install(run, dest=tmp_path / "dest")


def test_no_yaml_read_bypasses_the_safe_loader():
    """Only chunkwise/config/yaml_io.py calls PyYAML's loaders; every other module uses
    load_yaml."""
    calls = re.compile(r"yaml\.(safe_load|load|full_load|unsafe_load|load_all|safe_load_all)\(")
    offenders = [
        f"{p.relative_to(SRC)}:{n}"
        for p in SRC.rglob("*.py")
        if p.name != "yaml_io.py" or p.parent != SRC / "config"
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if calls.search(line)
    ]
    assert offenders == []
