"""`chunkwise demo` without models: documents, the held-out split, generated recipes, and the
stage ledger (skip what finished, record what failed, refuse another size in the same folder)."""

from __future__ import annotations

import json

import pytest

from chunkwise.demo import SIZES, Demo, DemoError, get_size
from chunkwise.demo.documents import build_documents, write_documents
from chunkwise.demo.pipeline import STAGES, split_records
from chunkwise.errors import BadInput
from chunkwise.train.recipe import load_recipe


def test_documents_are_deterministic_disjoint_and_sized(tmp_path):
    docs = build_documents(3, 1500)
    assert docs == build_documents(3, 1500)
    assert len({name for name, _ in docs}) == 3
    for _, text in docs:
        assert 0.7 * 1500 * 4 <= len(text) <= 1500 * 4
        assert text.startswith("## ")
    # disjoint runs of topics: no section heading appears in two documents
    heads = [{ln for ln in t.splitlines() if ln.startswith("## ")} for _, t in docs]
    assert not (heads[0] & heads[1]) and not (heads[1] & heads[2])
    paths = write_documents(tmp_path, 3, 1500)
    mtimes = [p.stat().st_mtime_ns for p in paths]
    assert [p.read_text() for p in paths] == [t for _, t in docs]
    assert [p.stat().st_mtime_ns for p in write_documents(tmp_path, 3, 1500)] == mtimes
    with pytest.raises(ValueError):
        build_documents(0, 1000)


def rec(doc, i):
    return {"id": f"{doc}-{i}", "source_id": f"{doc}.txt", "question": f"q{i}?"}


def test_split_holds_out_whole_documents_with_records():
    records = [rec("a", 0), rec("a", 1), rec("b", 0), rec("c", 0)]
    train, held, how = split_records(records, 1)
    assert {r["source_id"] for r in held} == {"c.txt"} and len(train) == 3
    assert "documents c" in how
    train, held, _ = split_records(records, 2)
    assert {r["source_id"] for r in held} == {"b.txt", "c.txt"}
    assert {r["source_id"] for r in train} == {"a.txt"}


def test_split_falls_back_to_a_question_then_to_nothing():
    train, held, how = split_records([rec("a", 0), rec("a", 1)], 1)
    assert [r["id"] for r in held] == ["a-1"] and [r["id"] for r in train] == ["a-0"]
    assert "question a-1" in how
    train, held, how = split_records([rec("a", 0)], 1)
    assert held == [] and len(train) == 1 and "nothing held out" in how


@pytest.mark.parametrize("mode", ["standard", "mapreduce"])
def test_generated_recipes_are_valid_and_carry_the_size(tmp_path, mode):
    size = get_size("small")
    demo = Demo(tmp_path / "demo", size)
    demo.load_state()
    (tmp_path / "demo" / "data").mkdir(parents=True)
    (tmp_path / "demo" / "data" / "train.jsonl").write_text("")
    recipe = load_recipe(demo.write_recipe(mode))
    assert recipe.model.name_or_path == "default" and recipe.model.lora.enabled
    assert recipe.model.lora.r == size.lora_r
    assert recipe.data.mode == mode and recipe.data.prompts == "base"
    assert recipe.train.max_steps == size.train_steps
    assert recipe.data.max_length == recipe.batching.max_tokens == size.train_max_length
    assert recipe.output_dir == str((tmp_path / "demo" / "train" / mode).resolve())
    if mode == "mapreduce":
        assert recipe.data.mapreduce == {"chunk_tokens": size.map_chunk_tokens}


def test_every_size_fits_its_windows():
    for s in SIZES.values():
        assert s.eval_length > s.eval_window  # retrieval documents exceed the window
        assert s.map_chunk_tokens < s.synth_window
        assert s.train_max_length > s.map_chunk_tokens  # a map example fits a training row
        assert 0 < s.heldout_documents < s.documents


class Ledger(Demo):
    """A demo whose stages only count their calls (and can be told to fail once)."""

    def __init__(self, *a, fail=None, **k):
        super().__init__(*a, echo=lambda s: self.lines.append(s), **k)
        self.lines: list[str] = []
        self.calls: list[str] = []
        self.fail = fail
        for name in STAGES:
            setattr(self, name, self._stage(name))

    def _stage(self, name):
        def run():
            self.calls.append(name)
            if name == self.fail:
                self.fail = None
                raise RuntimeError("boom")
            return {"n": 1}, f"{name} ok"

        return run


def test_finished_stages_are_skipped_and_a_failure_is_recorded(tmp_path):
    out = tmp_path / "demo"
    first = Ledger(out, get_size("smoke"), fail="training")
    with pytest.raises(RuntimeError):
        first.run()
    assert first.calls == ["documents", "synthesis", "split", "training"]
    state = json.loads((out / "demo.json").read_text())
    assert state["stages"]["training"]["status"] == "failed"
    assert "boom" in state["stages"]["training"]["error"]
    assert state["stages"]["split"]["status"] == "done"

    second = Ledger(out, get_size("smoke"))
    second.run()
    assert second.calls == ["training", "evaluation", "report"]
    assert sum("reused" in line for line in second.lines) == 3

    third = Ledger(out, get_size("smoke"))
    third.run()
    assert third.calls == []

    with pytest.raises(BadInput, match="--fresh"):
        Ledger(out, get_size("small")).run()
    # the same size name with other settings (an older chunkwise's "smoke") is refused too
    import dataclasses

    other = dataclasses.replace(get_size("smoke"), documents=2)
    with pytest.raises(BadInput, match="other sizes"):
        Ledger(out, other).run()


def test_bad_out_and_model_fail_before_any_stage(tmp_path):
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(BadInput, match="is a file"):
        Ledger(afile, get_size("smoke")).run()
    bad = Ledger(tmp_path / "d", get_size("smoke"), model="openai:m@http://127.0.0.1:1/v1")
    with pytest.raises(BadInput, match="hf:default"):
        bad.run()
    assert bad.calls == []


def test_split_refuses_to_train_on_nothing(tmp_path):
    demo = Demo(tmp_path / "d", get_size("smoke"))
    demo.load_state()
    (tmp_path / "d" / "synth" / "data").mkdir(parents=True)
    (tmp_path / "d" / "synth" / "data" / "part.jsonl").write_text("")
    with pytest.raises(DemoError, match="no records"):
        demo.split()
