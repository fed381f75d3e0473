"""`chunkwise order`: the JSON it prints and its errors."""

from __future__ import annotations

import json

import pytest

from chunkwise.cli import main

DOC = """The vault code is written in the note about Odile. Bakers bake bread at dawn.

Rain fell all day on the wide fields and the river rose.

Note about Odile: the code is 4817. The shop was closed.

The market was busy on Sunday and the band played late."""


@pytest.fixture()
def doc(tmp_path):
    p = tmp_path / "doc.txt"
    p.write_text(DOC)
    return p


@pytest.mark.parametrize("method", ["default", "dense", "chowliu", "dfs"])
@pytest.mark.parametrize("similarity", ["dense", "bm25"])
def test_order_json(doc, capsys, method, similarity):
    rc = main(
        [
            "order",
            "--doc",
            str(doc),
            "--question",
            "What is the vault code?",
            "--method",
            method,
            "--chunk-tokens",
            "20",
            "--similarity",
            similarity,
            "--embedder",
            "hashing",
            "--model",
            "scripted:echo",
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"chunks", "root", "order", "edges", "query_similarity", "similarity"}
    n = out["chunks"]
    assert n == 4
    assert sorted(out["order"]) == list(range(n))
    assert len(out["query_similarity"]) == n and len(out["similarity"]) == n
    assert all(len(row) == n for row in out["similarity"])
    if method == "default":
        assert out["order"] == [0, 1, 2, 3] and out["root"] is None
    else:
        assert out["root"] == 0 == out["order"][0]
    if method == "chowliu":
        assert len(out["edges"]) == n - 1
        assert all(len(e) == 3 and e[0] < e[1] for e in out["edges"])
        assert out["order"][1] == 2  # the note the root points to


def test_order_text_summary_and_errors(doc, capsys):
    assert (
        main(
            [
                "order",
                "--doc",
                str(doc),
                "--question",
                "vault code?",
                "--chunk-tokens",
                "20",
                "--embedder",
                "hashing",
                "--model",
                "scripted:echo",
            ]
        )
        == 0
    )
    assert "order:" in capsys.readouterr().out
    assert (
        main(
            [
                "order",
                "--doc",
                str(doc),
                "--question",
                "q",
                "--chunk-tokens",
                "0",
                "--model",
                "scripted:echo",
            ]
        )
        == 2
    )
    assert (
        main(
            [
                "order",
                "--doc",
                str(doc) + ".missing",
                "--question",
                "q",
                "--chunk-tokens",
                "5",
                "--model",
                "scripted:echo",
            ]
        )
        == 2
    )
    assert "no such file" in capsys.readouterr().err
