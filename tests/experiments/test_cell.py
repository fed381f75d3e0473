"""chunkwise.experiments.cell: a bench cell is an eval run on the bench's own examples."""

from __future__ import annotations

import json

import pytest

from chunkwise.experiments import cell
from chunkwise.llm import load_llm

MODEL = "scripted:passkey?ctx=4096"


def test_a_cell_is_an_eval_run_read_back_once_finished(tmp_path, monkeypatch):
    from chunkwise.data.synthetic import generate

    llm = load_llm(MODEL)
    docs = generate("passkey", length_tokens=800, n=2, seed=0, count_tokens=llm.count_tokens)
    path = cell.write_examples(tmp_path / "data", "passkey", docs)
    cell.write_examples(tmp_path / "data", "passkey", docs[:1])  # there already: kept
    assert len(path.read_text().splitlines()) == 2
    out = tmp_path / "run"
    got = cell.run_cell(model=MODEL, llm=llm, benchmark="infinitebench", task="passkey",
                        data=path.parent, out=out, strategy="mapreduce", window=512)  # fmt: skip
    assert (got["n"], got["correct"], got["accuracy"], got["interval"]) == (2, 2, 100.0, "wilson")
    assert got["scores"] == [1.0, 1.0] and got["llm_calls"] > 2 and got["window"] == 512
    assert json.loads((out / "results.json").read_text())["config"]["strategy"] == "mapreduce"
    assert [p["id"] for p in cell.predictions(out, "passkey")] == [d["id"] for d in docs]

    def answered(cfg, **kw):
        raise AssertionError("a finished cell was answered again")

    monkeypatch.setattr("chunkwise.eval.runner.run_eval", answered)
    again = cell.run_cell(model=MODEL, benchmark="infinitebench", task="passkey",
                          data=path.parent, out=out, strategy="mapreduce", window=512)  # fmt: skip
    assert again == got


@pytest.mark.parametrize(
    "spec,name",
    [
        ("hf:default", "hf_default"),
        ("vllm:x?tp=2", "vllm_x_tp=2"),
        ("openai:m@http://h:1/v1", "openai_m_http_h_1_v1"),
    ],
)
def test_model_folder_names(tmp_path, spec, name):
    assert cell.model_folder(tmp_path, spec) == tmp_path / name
