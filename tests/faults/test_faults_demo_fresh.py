"""`chunkwise demo --fresh` deletes only a folder a demo made (its ``demo.json`` ledger is
there), and only after every other check passed. Everything else: exit 2, nothing deleted.

Refusal tests replace ``shutil.rmtree`` with a trap, so a broken check fails the test
instead of deleting anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chunkwise.demo import Demo, get_size
from chunkwise.demo import fresh as fresh_mod
from chunkwise.errors import BadInput


@pytest.fixture
def trap(monkeypatch):
    calls: list[object] = []

    def rmtree(path, *a, **k):
        calls.append(path)
        raise AssertionError(f"rmtree({path}) was called")

    monkeypatch.setattr(fresh_mod.shutil, "rmtree", rmtree)
    return calls


def demo_folder(path: Path) -> Path:
    """A folder as `chunkwise demo` leaves it: its ledger and some outputs."""
    Demo(path, get_size("smoke")).load_state()
    (path / "docs").mkdir()
    (path / "docs" / "a.txt").write_text("made by the demo")
    return path


@pytest.fixture
def stub_run(monkeypatch):
    """Demo.run that only records (a real run trains models)."""
    import chunkwise.demo
    import chunkwise.demo.summary

    runs: list[Path] = []

    def run(self):
        runs.append(self.out)
        self.load_state()
        return self.state

    monkeypatch.setattr(chunkwise.demo.Demo, "run", run)
    monkeypatch.setattr(chunkwise.demo.summary, "final_text", lambda demo: "stub")
    return runs


def test_a_folder_chunkwise_did_not_make_is_refused(cli, tmp_path, trap, stub_run):
    mine = tmp_path / "thesis"
    mine.mkdir()
    (mine / "chapter1.tex").write_text("years of work")
    res = cli("demo", "--fresh", "--out", mine, "--size", "smoke")
    assert "has no demo.json" in res.error_line()
    assert (mine / "chapter1.tex").read_text() == "years of work"
    assert trap == [] and stub_run == []


@pytest.mark.parametrize("where", [".", "cwd-parent", "home", "/"])
def test_cwd_home_and_root_are_refused_even_with_a_ledger(
    cli, tmp_path, monkeypatch, trap, stub_run, where
):
    home = tmp_path / "home"
    work = home / "work"
    work.mkdir(parents=True)
    demo_folder(home)  # real ledgers: the refusal is for the place, not for a missing ledger
    demo_folder(work)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    out = {".": ".", "cwd-parent": "..", "home": str(home), "/": "/"}[where]
    res = cli("demo", "--fresh", "--out", out, "--size", "smoke")
    msg = res.error_line()
    assert "refusing to delete" in msg
    assert any(w in msg for w in ("working directory", "home folder", "root")), msg
    assert (work / "demo.json").exists() and (home / "demo.json").exists()
    assert trap == [] and stub_run == []


def test_symlink_and_fake_ledgers_are_refused(tmp_path, trap):
    real = demo_folder(tmp_path / "real")
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(BadInput, match="symbolic link"):
        fresh_mod.remove_demo_folder(link)
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "demo.json").write_text(json.dumps({"name": "not a demo"}))
    with pytest.raises(BadInput, match="not a demo ledger"):
        fresh_mod.remove_demo_folder(fake)
    (fake / "demo.json").write_bytes(b"[" * 200_000)
    with pytest.raises(BadInput, match="unreadable"):
        fresh_mod.remove_demo_folder(fake)
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(BadInput, match="is a file"):
        fresh_mod.remove_demo_folder(afile)
    assert trap == [] and (real / "docs" / "a.txt").exists() and afile.exists()


@pytest.mark.parametrize("model", ["hf:default?ctx=99", "nosuchbackend:x", "hf:a+adapter=/b"])
def test_a_bad_model_spec_fails_before_anything_is_deleted(cli, tmp_path, trap, stub_run, model):
    out = demo_folder(tmp_path / "demo")
    res = cli("demo", "--fresh", "--out", out, "--size", "smoke", "--model", model)
    res.error_line()
    assert (out / "docs" / "a.txt").exists() and trap == [] and stub_run == []


def test_a_demo_folder_is_started_over(cli, tmp_path, stub_run):
    out = demo_folder(tmp_path / "demo")
    res = cli("demo", "--fresh", "--out", out, "--size", "smoke")
    assert res.rc == 0, res.err
    assert stub_run == [out]
    assert not (out / "docs").exists()  # the old outputs are gone; a new ledger was started
    assert json.loads((out / "demo.json").read_text())["stages"] == {}
    assert fresh_mod.remove_demo_folder(tmp_path / "never-made") is False
