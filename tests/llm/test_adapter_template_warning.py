"""An adapter trained under a chat template of its own but copied without it is decoded under
the base model's template (or none) without a word: the measured failure was NO INFORMATION on
0 of 396 answer-free parts. Loading such a folder warns; the same folder with its tokenizer
files, or one trained with the base tokenizer's own template, does not."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

from chunkwise.llm.model_defaults import missing_template

TEMPLATE = "src/chunkwise/prompts/mapreduce/gemma_chat.jinja"


def run_folder(tmp_path: Path, template: str = TEMPLATE, prompts: str = "chat") -> Path:
    folder = tmp_path / "run"
    folder.mkdir(parents=True)
    recipe = {"model": {"chat_template": template}, "data": {"prompts": prompts}}
    (folder / "train_info.json").write_text(json.dumps({"recipe": recipe}))
    return folder


def test_a_run_trained_under_its_own_template_without_it_warns(tmp_path):
    folder = run_folder(tmp_path)
    warning = missing_template(folder)
    assert warning is not None
    assert TEMPLATE in warning and "tokenizer files" in warning


@pytest.mark.parametrize(
    "with_template",
    [
        lambda f: (f / "chat_template.jinja").write_text("{{ messages }}"),
        lambda f: (f / "tokenizer_config.json").write_text('{"chat_template": "{{ x }}"}'),
    ],
    ids=["chat_template.jinja", "tokenizer_config.json"],
)
def test_a_run_that_holds_its_template_does_not(tmp_path, with_template):
    folder = run_folder(tmp_path)
    with_template(folder)
    assert missing_template(folder) is None


def test_nothing_to_say_without_a_template_of_its_own(tmp_path):
    assert missing_template(tmp_path) is None  # no training run here
    assert missing_template(run_folder(tmp_path / "a", template="auto")) is None
    assert missing_template(run_folder(tmp_path / "b", prompts="base")) is None
    # a template in tokenizer_config.json's keys but empty is no template
    folder = run_folder(tmp_path / "c")
    (folder / "tokenizer_config.json").write_text('{"chat_template": ""}')
    assert missing_template(folder) is not None
    (folder / "train_info.json").write_text("{not json")
    assert missing_template(folder) is None  # not a run's summary: nothing claimed


@pytest.mark.slow
def test_loading_the_shipped_adapter_without_its_tokenizer_files_warns(tmp_path, caplog):
    """The real adapter: copied with its tokenizer files it loads under its own chat template
    and says nothing; copied without them it loads under the base tokenizer's, and the load
    says so."""
    from chunkwise.llm import default_mr, load_llm

    if not (default_mr.package_dir() / "adapter_model.safetensors").is_file():
        pytest.skip("no hf:default-mr adapter committed yet: run `make default-mr`")
    source = default_mr.model_dir(default_mr.NAME)
    whole, bare = tmp_path / "whole", tmp_path / "bare"
    shutil.copytree(source, whole)
    shutil.copyfile(default_mr.package_dir() / "train_info.json", whole / "train_info.json")
    shutil.copytree(whole, bare, ignore=shutil.ignore_patterns("tokenizer*", "chat_template.jinja"))
    with caplog.at_level(logging.WARNING, logger="chunkwise.llm.loading"):
        llm = load_llm(f"hf:{whole}")
    assert llm.chat and not caplog.records
    trained = llm.tokenizer.chat_template
    assert trained == (whole / "chat_template.jinja").read_text()
    llm.close()
    with caplog.at_level(logging.WARNING, logger="chunkwise.llm.loading"):
        llm = load_llm(f"hf:{bare}")
    # what the warning is about: the template it was trained under is not the one in use
    assert not llm.chat or llm.tokenizer.chat_template != trained
    assert [r.getMessage() for r in caplog.records if "no chat template" in r.getMessage()]
    llm.close()
