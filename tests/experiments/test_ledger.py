"""The benchmarks' ledger: finished cells survive a crash, a cut line is dropped, and the next
row written after a cut line is not glued onto it."""

from __future__ import annotations

import json

from chunkwise.experiments.ledger import Ledger, ledger_key


def test_rows_survive_a_new_ledger_and_keys_are_stable(tmp_path):
    path = tmp_path / "cells.jsonl"
    k = ledger_key("hf:default", {"b": 1, "a": 2}, 32000)
    assert k == ledger_key("hf:default", {"a": 2, "b": 1}, 32000)
    with Ledger(path) as a:
        assert k not in a and a.get(k) is None
        a.put(k, {"score": 1.0})
    with Ledger(path) as b:
        assert k in b and b.get(k)["score"] == 1.0


def test_a_cut_line_is_dropped_and_the_next_row_starts_on_its_own_line(tmp_path):
    path = tmp_path / "cells.jsonl"
    with Ledger(path) as led:
        led.put("one", {"v": 1})
        led.put("two", {"v": 2})
    text = path.read_text()
    path.write_text(text[: len(text) - 10])  # a crash cut the last row, newline and all
    with Ledger(path) as again:
        assert "one" in again and "two" not in again
        again.put("three", {"v": 3})
    lines = path.read_text().splitlines()
    assert [json.loads(x)["key"] for x in lines] == ["one", "three"]


def test_a_read_only_ledger_reads_beside_a_writer_and_cannot_write(tmp_path):
    import pytest

    path = tmp_path / "cells.jsonl"
    with Ledger(path) as writer:
        writer.put("one", {"v": 1})
        with path.open("a") as f:
            f.write('{"key": "two", "v"')  # the writer is mid-line
        view = Ledger(path, readonly=True)  # no writer's lock taken, the cut line skipped
        assert "one" in view and "two" not in view
        with pytest.raises(RuntimeError, match="read-only"):
            view.put("three", {"v": 3})
        view.close()
    assert Ledger(tmp_path / "none.jsonl", readonly=True).rows == {}
