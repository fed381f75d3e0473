"""`chunkwise compare`: the table's numbers, the averages, the JSON and the PNG."""

from __future__ import annotations

import json
import struct

import pytest

from chunkwise import cli
from chunkwise.errors import BadInput
from chunkwise.eval.compare import compare, to_markdown


@pytest.fixture
def main(monkeypatch):
    monkeypatch.setattr(cli, "COMMANDS", {"eval": "evaluate", "compare": "compare"})
    return cli.main


def fake_run(root, name, scores, strategy="standard"):
    folder = root / name
    folder.mkdir(parents=True)
    results = {
        "results": {t: {"alias": t.upper(), "score": v, "n": 10} for t, v in scores.items()},
        "config": {
            "model": "hf:default",
            "strategy": strategy,
            "scorer": "official",
            "data": "synthetic:4096",
        },
    }
    (folder / "results.json").write_text(json.dumps(results))
    return folder


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_table_numbers_and_averages(tmp_path):
    a = fake_run(tmp_path, "std", {"passkey": 100.0, "kv_retrieval": 40.0, "math_find": 10.0})
    b = fake_run(tmp_path, "mr", {"passkey": 50.0, "kv_retrieval": 80.0}, strategy="mapreduce")
    t = compare([a, b])
    assert t["tasks"] == ["passkey", "kv_retrieval", "math_find"]
    assert t["scores"]["kv_retrieval"] == {"std": 40.0, "mr": 80.0}
    assert t["scores"]["math_find"] == {"std": 10.0, "mr": None}
    assert t["task_average"] == {"passkey": 75.0, "kv_retrieval": 60.0, "math_find": 10.0}
    # runs are averaged over the tasks both have, so they stay comparable
    assert t["average_over"] == ["passkey", "kv_retrieval"]
    assert t["run_average"] == {"std": 70.0, "mr": 65.0}
    assert t["average"] == 67.5
    md = to_markdown(t)
    rows = md.splitlines()
    assert rows[0] == "| task | std | mr | average |"
    assert "| kv_retrieval | 40.00 | 80.00 | 60.00 |" in rows
    assert "| math_find | 10.00 | – | 10.00 |" in rows
    assert "| **average** | **70.00** | **65.00** | **67.50** |" in rows
    assert "left out: math_find" in md and "mr: model hf:default, strategy mapreduce" in md


def test_cli_prints_table_and_writes_png_and_json(main, tmp_path, capsys):
    a = fake_run(tmp_path / "x", "run", {"passkey": 100.0, "number_string": 90.0})
    b = fake_run(tmp_path / "y", "run", {"passkey": 20.0, "number_string": 30.0})
    png, js = tmp_path / "out" / "cmp.png", tmp_path / "cmp.json"
    assert main(["compare", str(a), str(b), "--plot", str(png), "--json", str(js)]) == 0
    out = capsys.readouterr().out
    # two folders named "run": labels take the parent folder too
    assert "| task | x/run | y/run | average |" in out
    assert "| passkey | 100.00 | 20.00 | 60.00 |" in out
    assert "| **average** | **95.00** | **25.00** | **60.00** |" in out
    table = json.loads(js.read_text())
    assert table["run_average"] == {"x/run": 95.0, "y/run": 25.0}
    assert table["scores"]["number_string"] == {"x/run": 90.0, "y/run": 30.0}
    width, height = png_size(png)
    assert width >= 600 and height >= 500


def test_single_run_and_bad_folders(main, tmp_path, capsys):
    a = fake_run(tmp_path, "only", {"passkey": 25.0, "code_run": 75.0})
    assert main(["compare", str(a), "--plot", str(tmp_path / "one.png")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "| task | only |" and "| **average** | **50.00** |" in out
    assert (tmp_path / "one.png").stat().st_size > 5000
    with pytest.raises(
        BadInput, match="missing not found; is .* a finished `chunkwise eval` run folder"
    ):
        compare([tmp_path / "missing"])
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "results.json").write_text('{"results": {"passkey": {}}}')
    assert main(["compare", str(tmp_path / "broken")]) == 2
    assert "not a chunkwise results file" in capsys.readouterr().err


def test_columns_scored_differently_are_marked(tmp_path):
    a = fake_run(tmp_path, "official-n10", {"passkey": 100.0})
    b = fake_run(tmp_path, "lenient-n2", {"passkey": 50.0})
    data = json.loads((b / "results.json").read_text())
    data["config"]["scorer"] = "lenient"
    data["results"]["passkey"]["n"] = 2
    data["templates"] = {"kind": "official", "family": "gpt4", "templates_sha256": "ab" * 32}
    (b / "results.json").write_text(json.dumps(data))
    t = compare([a, b])
    assert set(t["differs"]) == {"scorer", "n", "templates"} and t["marked"] == ["lenient-n2"]
    md = to_markdown(t)
    assert md.splitlines()[0] == "| task | official-n10 | lenient-n2 ⚠ | average |"
    assert "differ in scorer" in md and "passkey=2" in md and "official gpt4 abababab" in md
    same = compare([a, fake_run(tmp_path, "again", {"passkey": 90.0})])
    assert same["differs"] == {} and "⚠" not in to_markdown(same)


@pytest.mark.parametrize(
    ("flag", "value", "why"),
    [
        ("--json", "DIR", "is a folder"),
        ("--plot", "chart.txt", "must end in .png / .pdf / .svg"),
        ("--plot", "FILE/chart.png", "is a file, so nothing can be made in it"),
        ("--json", "FILE/t.json", "is a file, so nothing can be made in it"),
    ],
)
def test_bad_output_paths_exit_2_before_any_work(main, tmp_path, capsys, flag, value, why):
    run = fake_run(tmp_path, "r", {"passkey": 1.0})
    (tmp_path / "DIR").mkdir()
    (tmp_path / "FILE").write_text("x")
    value = str(tmp_path / value)
    assert main(["compare", str(run), flag, value]) == 2
    err = capsys.readouterr().err
    assert why in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
