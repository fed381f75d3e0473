"""Rescoring a finished run (`chunkwise eval` again with another --extract or --scorer) builds
no model backend: every prediction is there, and the model block comes from the run's results
file. A run with something left to answer, or without a results file, loads the model."""

from __future__ import annotations

import json

import pytest

from chunkwise import cli


@pytest.fixture
def loads(monkeypatch):
    """Counts backend constructions (``chunkwise.llm.load_llm``, which the runner calls)."""
    import chunkwise.llm

    real = chunkwise.llm.load_llm
    specs: list[str] = []

    def counting(spec, *a, **k):
        specs.append(spec)
        return real(spec, *a, **k)

    monkeypatch.setattr(chunkwise.llm, "load_llm", counting)
    return specs


@pytest.fixture
def main(monkeypatch, capsys):
    monkeypatch.setattr(cli, "COMMANDS", {"eval": "evaluate"})

    def run(*args: str) -> dict:
        capsys.readouterr()
        rc = cli.main(["eval", *args, "--no-progress"])
        cap = capsys.readouterr()
        assert rc == 0, cap.err
        return json.loads(cap.out)

    return run


def _run_args(tmp_path, n: int = 3) -> list[str]:
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    with (data / "passkey.jsonl").open("w", encoding="utf-8") as f:
        for i in range(n):
            key = str(10000 + 7 * i)
            ctx = f"Grass is green. The pass key is {key}. Remember it. Sky is blue."
            rec = {"id": i, "context": ctx, "input": "What is the pass key?", "answer": key}
            f.write(json.dumps({**rec, "options": []}) + "\n")
    return [
        "--model=scripted:passkey",
        "--tasks=passkey",
        f"--data={data}",
        f"--output={tmp_path / 'run'}",
    ]


def test_rescoring_builds_no_backend(tmp_path, main, loads, monkeypatch):
    args = _run_args(tmp_path)
    first = main(*args)
    assert loads == ["scripted:passkey"] and first["scores"] == {"passkey": 100.0}
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert res["timing"]["model_loaded"] is True

    def no_backend(*a, **k):
        raise AssertionError("a rescore constructed a model backend")

    monkeypatch.setattr("chunkwise.llm.load_llm", no_backend)
    for extra, name in (
        (["--extract=answer_field"], "results_official_answer_field.json"),
        (["--scorer=lenient"], "results_lenient_none.json"),
        ([], "results.json"),
    ):
        again = main(*args, *extra)
        assert again["scores"] == {"passkey": 100.0} and again["results"].endswith(name)
        new = json.loads((tmp_path / "run" / name).read_text())
        assert new["model"] == res["model"]  # taken from the run's results file
        assert new["timing"]["model_loaded"] is False
        assert _unscored(new["configs"]) == _unscored(res["configs"])  # prompt kind included


def _unscored(configs: dict) -> dict:
    return {
        t: {k: v for k, v in c.items() if k not in ("scorer", "extract")}
        for t, c in configs.items()
    }


def test_a_rerun_with_work_left_loads_the_model(tmp_path, main, loads):
    args = _run_args(tmp_path)
    main(*args)
    preds = tmp_path / "run" / "predictions" / "passkey.jsonl"
    lines = preds.read_text().splitlines()
    preds.write_text("\n".join(lines[:-1]) + "\n")  # one example left to answer
    assert main(*args, "--extract=answer_field")["n"] == {"passkey": 3}
    assert loads == ["scripted:passkey"] * 2

    failed = json.loads(lines[0])
    failed["error"] = "simulated failure"
    preds.write_text("\n".join([json.dumps(failed), *lines[1:]]) + "\n")  # one failed example
    assert main(*args)["scores"] == {"passkey": 100.0}
    assert len(loads) == 3


def test_a_finished_run_without_results_loads_the_model(tmp_path, main, loads):
    args = _run_args(tmp_path)
    main(*args)
    (tmp_path / "run" / "results.json").unlink()  # e.g. a run that stopped in scoring
    assert main(*args)["scores"] == {"passkey": 100.0}
    assert len(loads) == 2
    assert main(*args)["scores"] == {"passkey": 100.0}  # now it has one: no load
    assert len(loads) == 2


def test_stored_model_info_must_match_the_spec_and_be_complete(tmp_path):
    from chunkwise.eval.rescore import stored_model_info

    model = {"spec": "scripted:passkey", "prompt_kind": "base", "strategy_window": 8192}
    (tmp_path / "results.json").write_text(json.dumps({"model": model}))
    assert stored_model_info(tmp_path, "scripted:passkey") == model
    assert stored_model_info(tmp_path, "scripted:echo") is None
    (tmp_path / "results.json").write_text(json.dumps({"model": {**model, "strategy_window": "x"}}))
    assert stored_model_info(tmp_path, "scripted:passkey") is None
    (tmp_path / "results.json").write_text("{not json")
    assert stored_model_info(tmp_path, "scripted:passkey") is None
