"""`chunkwise train RECIPE --data-mix`: what a MapReduce recipe's data teaches per family, on
real oracle records (`chunkwise synth --teacher oracle`) and the embedded model's tokenizer,
counted against the records themselves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chunkwise import cli
from chunkwise.train.data_mix import mix_rows, mix_table

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "embedded" / "default-mr.yaml"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("oracle")
    args = ["synth", "--teacher", "oracle", "--model", "hf:default-mr", "--lengths", "2000,4000"]
    args += ["--window", "4096", "--strategy-args", "prompts=chat,chunk_tokens=500"]
    args += ["--families", "passkey,extractive_qa", "--n", "3", "--seed", "0"]
    assert cli.main([*args, "--unanswerable", "0.34", "--no-progress", "--out", str(out)]) == 0
    return out / "data" / "oracle.jsonl"


def truth(path: Path) -> dict[str, dict[str, int]]:
    """Per family: the records' map findings, NO INFORMATION maps and reduces."""
    got: dict[str, dict[str, int]] = {}
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        c = got.setdefault(rec["meta"]["family"], {"finding": 0, "empty": 0, "reduce": 0})
        for m in rec["intermediate"]["map"]:
            c["empty" if m["no_information"] else "finding"] += 1
        c["reduce"] += 1
    return got


def data_mix(capsys, oracle: Path, *overrides: str) -> dict[str, dict]:
    argv = ["train", str(RECIPE), "--data-mix", "--json", f"--data.paths=[{oracle}]"]
    assert cli.main([*argv, "--data.reduce_only_paths=[]", *overrides]) == 0
    return {row["family"]: row for row in json.loads(capsys.readouterr().out)}


def test_the_mix_counts_every_map_example_of_the_records(oracle, capsys):
    want = truth(oracle)
    rows = data_mix(capsys, oracle)  # the recipe's own keep: 0.15 (kv_retrieval 0.3)
    assert set(rows) == {*want, "all"}
    for fam, c in want.items():
        row = rows[fam]
        assert row["map findings"] == c["finding"] and row["reduce"] == c["reduce"]
        assert row["map NO INFO"] + row["NO INFO left out"] == c["empty"]
        assert 0 < row["map NO INFO"] < 0.4 * c["empty"]  # about 0.15 of them kept
        assert row["abstain %"] == round(
            100 * row["map NO INFO"] / (row["map NO INFO"] + row["map findings"]), 1
        )
    assert sum(rows[f]["token %"] for f in want) == pytest.approx(100, abs=0.2)
    assert rows["all"]["examples"] == sum(rows[f]["examples"] for f in want)

    # a family's own keep share moves that family's NO INFORMATION examples alone
    more = data_mix(capsys, oracle, "--data.no_information_keep_by_family={extractive_qa: 1.0}")
    assert more["extractive_qa"]["map NO INFO"] == want["extractive_qa"]["empty"]
    assert more["extractive_qa"]["NO INFO left out"] == 0
    assert more["passkey"] == rows["passkey"] | {"token %": more["passkey"]["token %"]}
    assert more["passkey"]["token %"] < rows["passkey"]["token %"]


def test_the_table_and_records_without_a_family():
    mix = {"-/map_finding": 3, "-/map_no_information": 1, "-/map_no_information_dropped": 5}
    mix |= {"-/reduce": 2, "-/tokens": 900}
    [row] = mix_rows(mix)  # one family: no total row
    assert row["abstain %"] == 25.0 and row["examples"] == 6 and row["token %"] == 100.0
    table = mix_table({**mix, "passkey/standard": 4, "passkey/tokens": 100})
    lines = table.splitlines()
    assert lines[0].startswith("| family | map findings | map NO INFO | NO INFO left out |")
    assert lines[2] == "| - | 3 | 1 | 5 | 25.0 | 0 | 2 | 0 | 6 | 900 | 90.0 |"
    assert lines[3] == "| passkey | 0 | 0 | 0 | - | 0 | 0 | 4 | 4 | 100 | 10.0 |"
    assert lines[4] == "| all | 3 | 1 | 5 | 25.0 | 0 | 2 | 4 | 10 | 1000 | 100.0 |"


def test_published_mixes_render_one_table_each():
    from chunkwise.train.data_mix import results_table

    rows = mix_rows(
        {"passkey/map_finding": 2, "passkey/map_no_information": 2, "passkey/tokens": 9}
    )
    text = results_table({"mixes": [{"name": "a", "rows": rows}, {"name": "b", "rows": rows}]})
    assert text.startswith("a:\n\n| family |") and "\n\nb:\n\n| family |" in text
    assert text.count("| passkey | 2 | 2 | 0 | 50.0 |") == 2
