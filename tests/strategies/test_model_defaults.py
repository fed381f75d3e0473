"""Issue #46: a model carries its own decoding defaults. The strategy.json of a packaged adapter
or a model folder (or a MapReduce training run's recipe.yaml) supplies the strategy options;
the user's explicit options win; results.json records the resolved options and where each came
from; a model without them is unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chunkwise.config import dump_yaml
from chunkwise.errors import BadInput
from chunkwise.eval.runner import EvalConfig, run_eval
from chunkwise.llm import scripted
from chunkwise.llm.loading import strategy_defaults
from chunkwise.strategies import resolve_options

CARRIED = {"chunk_tokens": 300, "grounding": True, "prompts": "base", "window": 2048}


def model_folder(tmp_path: Path, options: dict | None = None) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "strategy.json").write_text(json.dumps({"mapreduce": options or CARRIED}))
    return folder


def test_a_packaged_adapter_carries_its_strategy_json(tmp_path, monkeypatch):
    pkg = model_folder(tmp_path)
    monkeypatch.setenv("CHUNKWISE_DEFAULT_MR", str(pkg))
    resolved = resolve_options("mapreduce", "hf:default-mr", {})
    assert resolved.options == CARRIED
    assert set(resolved.sources.values()) == {f"model: {pkg / 'strategy.json'}"}
    strategy = resolved.build()
    assert strategy.window == 2048 and strategy.chunk_tokens == 300 and strategy.grounding


def test_the_users_options_win_and_are_converted(tmp_path):
    folder = model_folder(tmp_path)
    resolved = resolve_options("mapreduce", f"hf:{folder}", {"chunk_tokens": "500", "window": 100})
    assert resolved.options == {**CARRIED, "chunk_tokens": 500, "window": 100}
    assert resolved.sources["chunk_tokens"] == resolved.sources["window"] == "user"
    assert resolved.sources["grounding"] == f"model: {folder / 'strategy.json'}"


def test_a_model_without_strategy_json_is_unchanged(tmp_path):
    assert strategy_defaults("hf:default") is None
    assert strategy_defaults("scripted:passkey") is None
    assert strategy_defaults(f"hf:{tmp_path}") is None  # a folder with nothing to carry
    resolved = resolve_options("mapreduce", "scripted:passkey", {"chunk_tokens": "400"})
    assert resolved.options == {"chunk_tokens": 400}
    assert resolved.sources == {"chunk_tokens": "user"}


def test_options_for_another_strategy_are_not_applied(tmp_path):
    folder = model_folder(tmp_path)
    assert resolve_options("standard", f"hf:{folder}", {}).options == {}


def test_a_bad_carried_option_names_the_file(tmp_path):
    folder = model_folder(tmp_path, {"chunk_tokens": "many"})
    with pytest.raises(BadInput) as e:
        resolve_options("mapreduce", f"hf:{folder}", {})
    assert str(e.value) == (
        f"{folder / 'strategy.json'}: strategy 'mapreduce': option chunk_tokens='many' is not "
        "valid; expected a whole number"
    )


def test_a_mapreduce_training_run_carries_its_recipe_options(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "train_info.json").write_text("{}")
    recipe = {"data": {"mode": "mapreduce", "mapreduce": {"chunk_tokens": 700}, "window": 3000}}
    dump_yaml(recipe, run / "recipe.yaml")
    assert resolve_options("mapreduce", str(run), {}).options == {
        "chunk_tokens": 700,
        "window": 3000,
    }
    dump_yaml({"data": {"mode": "standard", "window": 3000}}, run / "recipe.yaml")
    assert strategy_defaults(str(run)) is None  # trained on standard prompts: nothing carried


def test_eval_applies_them_and_results_json_records_both(tmp_path):
    folder = model_folder(tmp_path)
    cfg = EvalConfig(
        model=f"hf:{folder}",
        strategy="mapreduce",
        strategy_args={"chunk_tokens": "250"},
        data="synthetic:600",
        limit=2,
        output=str(tmp_path / "run"),
    ).resolved()
    results = run_eval(cfg, llm=scripted.SCRIPTS["passkey"](), progress=False)
    on_disk = json.loads((tmp_path / "run" / results["files"]["results"]).read_text())
    block = on_disk["strategy"]
    assert block["options"] == {**CARRIED, "chunk_tokens": 250}
    source = f"model: {folder / 'strategy.json'}"
    assert block["option_sources"] == {
        "chunk_tokens": "user",
        "grounding": source,
        "prompts": source,
        "window": source,
    }
    assert on_disk["model"]["strategy_window"] == 2048  # the carried window was used


def test_eval_with_a_model_that_carries_nothing_records_only_the_users(tmp_path):
    cfg = EvalConfig(
        model="scripted:passkey",
        strategy="mapreduce",
        data="synthetic:600",
        limit=1,
        context_window=500,
        output=str(tmp_path / "run"),
    ).resolved()
    results = run_eval(cfg, progress=False)
    assert results["strategy"]["options"] == {"window": 500}
    assert results["strategy"]["option_sources"] == {"window": "user"}
