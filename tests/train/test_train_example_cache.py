"""The tokenized-example cache: a second build loads exactly what the first tokenized (no
tokenizing), and any change of data, tokenizer or format settings misses the cache."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

import chunkwise.train.example_cache as cache
from chunkwise.train.recipe import load_recipe
from chunkwise.train.tokenizer import train_bpe

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "train" / "pyramid_align.jsonl"


def setup(tmp_path):
    r = load_recipe(
        REPO / "recipes" / "tiny" / "pyramid_align-mapreduce.yaml",
        [f"--data.paths=[{FIXTURE}]", "--data.limit=3", f"--output_dir={tmp_path}"],
    )
    tok = train_bpe([FIXTURE.read_text(encoding="utf-8")[:50000]], 512)
    return r.data, tok


def test_second_build_comes_from_the_cache(tmp_path, monkeypatch):
    data, tok = setup(tmp_path)
    first, stats, hit = cache.cached_examples(data, tok, "chat", [FIXTURE], tmp_path / "c")
    assert not hit and len(list((tmp_path / "c").glob("examples-*.npz"))) == 1

    def no_tokenizing(*a, **k):
        raise AssertionError("tokenized again despite the cache")

    monkeypatch.setattr(cache, "build_examples", no_tokenizing)
    again, stats2, hit = cache.cached_examples(data, tok, "chat", [FIXTURE], tmp_path / "c")
    assert hit and stats2.to_dict() == stats.to_dict()
    assert [(e.id, e.stage, e.truncated) for e in again] == [
        (e.id, e.stage, e.truncated) for e in first
    ]
    for a, b in zip(first, again, strict=True):
        assert np.array_equal(a.input_ids, b.input_ids) and np.array_equal(a.labels, b.labels)
        assert b.input_ids.dtype == a.input_ids.dtype


def test_key_changes_with_data_tokenizer_and_format(tmp_path):
    data, tok = setup(tmp_path)
    base = cache.cache_key(data, tok, "chat", [FIXTURE])
    assert cache.cache_key(data, tok, "chat", [FIXTURE]) == base
    assert cache.cache_key(data, tok, "base", [FIXTURE]) != base
    assert cache.cache_key(dataclasses.replace(data, max_length=999), tok, "chat", [FIXTURE]) != (
        base
    )
    other_tok = train_bpe([FIXTURE.read_text(encoding="utf-8")[:50000]], 600)
    assert cache.cache_key(data, other_tok, "chat", [FIXTURE]) != base
    copy = tmp_path / "copy.jsonl"
    copy.write_text(FIXTURE.read_text(encoding="utf-8") + "\n")
    assert cache.cache_key(data, tok, "chat", [copy]) != base
