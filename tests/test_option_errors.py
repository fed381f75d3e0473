"""Issue #46: one options system, one error format. A bad value given through a YAML recipe, a
CLI flag, ``--strategy-args`` or a model spec's ``?key=`` fails the same way, naming where it
was given, the key, the value and what is allowed::

    <where>: option <key>=<value> is not valid; expected <what is allowed>
"""

from __future__ import annotations

import re

import pytest

from chunkwise import cli

LINE = re.compile(
    r"^chunkwise eval: error: (?P<where>.+): option (?P<key>\w+)='lots' is not valid; "
    r"expected (?P<allowed>.+)$"
)


def _yaml(tmp_path):
    path = tmp_path / "eval.yaml"
    path.write_text("model: scripted:passkey\ndata: synthetic:400\ncontext_window: lots\n")
    return ["--config", str(path)], f"{path}:3", "context_window", "a whole number or none"


def _flag(tmp_path):
    return (
        ["--context-window", "lots"],
        "--context-window",
        "context_window",
        ("a whole number or none"),
    )


def _strategy_args(tmp_path):
    args = ["--strategy", "mapreduce", "--strategy-args", "chunk_tokens=lots"]
    return args, "strategy 'mapreduce'", "chunk_tokens", "a whole number"


def _spec(tmp_path):
    spec = "scripted:passkey?ctx=lots"
    return ["--model", spec], f"model spec {spec!r}", "ctx", "a whole number or none"


@pytest.mark.parametrize("case", [_yaml, _flag, _strategy_args, _spec], ids=lambda f: f.__name__)
def test_one_error_format_whatever_the_source(case, tmp_path, capsys):
    extra, where, key, allowed = case(tmp_path)
    base = ["eval", "--model", "scripted:passkey", "--data", "synthetic:400", "--limit", "1"]
    argv = [*base, "--output", str(tmp_path / "run"), "--no-progress", *extra]
    assert cli.main(argv) == 2
    line = capsys.readouterr().err.strip()
    print(line)  # the four lines, for the record
    m = LINE.match(line)
    assert m, line
    assert (m["where"], m["key"], m["allowed"]) == (where, key, allowed)


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (["--strategy-args", "windw=1"], "strategy 'standard': unknown option(s) windw"),
        (["--model", "scripted:passkey?ctxx=1"], "model spec 'scripted:passkey?ctxx=1': unknown"),
        (["--wandb-stepp", "1"], None),  # argparse's own: not a flag of eval
    ],
)
def test_unknown_keys_name_the_valid_ones(argv, start, tmp_path, capsys):
    base = ["eval", "--model", "scripted:passkey", "--data", "synthetic:400", "--limit", "1"]
    full = [*base, "--output", str(tmp_path / "run"), "--no-progress", *argv]
    if start is None:
        with pytest.raises(SystemExit):
            cli.main(full)
        return
    assert cli.main(full) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"chunkwise eval: error: {start}") and "valid options: " in err
