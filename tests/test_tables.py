"""chunkwise.tables: one markdown table writer and the ``55 [35, 80]`` format."""

from __future__ import annotations

import pytest

from chunkwise.tables import estimate, markdown_table


def test_rows_of_lists_name_first_numbers_right_aligned():
    md = markdown_table([["passkey", 90, None]], ["task", "a", "b"])
    assert md.splitlines() == ["| task | a | b |", "|---|---:|---:|", "| passkey | 90 |  |"]


def test_rows_of_dicts_take_their_keys_in_order_and_a_missing_text():
    rows = [{"arm": "x", "n": 3}, {"arm": "y", "score": 0.5}]
    md = markdown_table(rows, align="lrr", missing="–")
    assert md.splitlines() == [
        "| arm | n | score |",
        "|---|---:|---:|",
        "| x | 3 | – |",
        "| y | – | 0.5 |",
    ]
    assert markdown_table(rows, ["n", "arm"]).splitlines()[2] == "| 3 | x |"


def test_a_pipe_or_a_newline_stays_inside_its_cell():
    md = markdown_table([["a|b", "line\nbreak"]], ["name", "v"], align="ll")
    assert md.splitlines()[2] == "| a\\|b | line break |"
    assert md.splitlines()[1] == "|---|---|"


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError):
        markdown_table([["x", 1]], ["only"])
    with pytest.raises(ValueError):
        markdown_table([["x"]])
    with pytest.raises(ValueError):
        markdown_table([["x", 1]], ["a", "b"], align="lc")


def test_estimate():
    assert estimate(55.2, 35.4, 80.0) == "55 [35, 80]"
    assert estimate(55.25, 35.4, 80.0, digits=1) == "55.2 [35.4, 80.0]"
    assert estimate(5, -2, 12, signed=True) == "+5 [-2, +12]"
