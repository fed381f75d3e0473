"""The settings check shared by the LLM and oracle teachers (chunkwise.synth.settings)."""

from __future__ import annotations

import json

import pytest

from chunkwise.errors import BadInput
from chunkwise.llm.scripted import ScriptedLLM
from chunkwise.synth import SynthConfig, run_synth
from chunkwise.synth.settings import check_settings


def test_first_run_writes_the_settings_and_a_rerun_must_match(tmp_path):
    path = tmp_path / "config.json"
    check_settings(path, {"lengths": (1500, 2000), "n": 3})
    assert json.loads(path.read_text()) == {"lengths": [1500, 2000], "n": 3}
    check_settings(path, {"lengths": (1500, 2000), "n": 3})  # a tuple matches its JSON list
    with pytest.raises(BadInput, match=r"other settings \(n: 3 -> 4\).*--force-it"):
        check_settings(path, {"lengths": [1500, 2000], "n": 4}, override_flag="--force-it")
    assert json.loads(path.read_text())["n"] == 3  # a refusal changes nothing
    check_settings(path, {"lengths": [1500, 2000], "n": 4}, override=True)
    assert json.loads(path.read_text())["n"] == 4


@pytest.mark.parametrize(
    "text, problem",
    [("{not json", "not valid JSON"), ("", "not valid JSON"), ("[1, 2]", "not a JSON object")],
)
def test_an_unreadable_settings_file_is_one_line_naming_it(tmp_path, text, problem):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(BadInput, match=rf"config.json is {problem}.*use a new --out"):
        check_settings(path, {"n": 1})


def test_llm_teacher_refuses_a_rerun_with_other_settings(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "d.txt").write_text(" ".join(f"The mill opened on day {j}." for j in range(80)))
    base = dict(docs=str(docs), out=str(tmp_path / "out"), embedder="hashing", progress=False)
    run_synth(SynthConfig(**base, window=1024), llm=ScriptedLLM(default=""))
    with pytest.raises(BadInput, match=r"other settings \(window: 1024 -> 2048\).*--override"):
        run_synth(SynthConfig(**base, window=2048), llm=ScriptedLLM(default=""))
    again = SynthConfig(**base, window=2048, override_settings=True)
    run_synth(again, llm=ScriptedLLM(default=""))
    assert json.loads((tmp_path / "out" / "config.json").read_text())["window"] == 2048
