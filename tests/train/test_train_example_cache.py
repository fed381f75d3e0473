"""The tokenized-example cache: a second build loads exactly what the first tokenized (no
tokenizing), any change of data, tokenizer or format settings misses the cache, and a damaged
cache file (empty, truncated, random bytes, any field of the wrong type) is a miss: logged,
rebuilt into the same examples as a clean build, and replaced."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
    assert sum(n for k, n in stats2.mix.items() if not k.endswith(("/tokens", "_dropped"))) == len(
        first
    )  # the data mix (chunkwise train --data-mix) comes back with the examples
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


# -- a damaged cache is a miss: logged, rebuilt, replaced ------------------------------------


def _as_tuples(examples):
    return [(e.id, e.stage, e.truncated, e.input_ids.tolist(), e.labels.tolist()) for e in examples]


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    """A clean build: (data, tokenizer, cache folder, cache file, examples, stats)."""
    root = tmp_path_factory.mktemp("clean")
    data, tok = setup(root)
    examples, stats, hit = cache.cached_examples(data, tok, "chat", [FIXTURE], root / "c")
    assert not hit
    (path,) = (root / "c").glob("examples-*.npz")
    return data, tok, path, _as_tuples(examples), stats.to_dict()


def assert_rebuilt(clean, damaged: bytes, caplog) -> None:
    """The cache file holds ``damaged``: the next build misses, warns naming the file, builds
    the clean examples again and replaces the file with a readable one."""
    data, tok, path, want, want_stats = clean
    path.write_bytes(damaged)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="chunkwise.train.example_cache"):
        examples, stats, hit = cache.cached_examples(data, tok, "chat", [FIXTURE], path.parent)
    assert not hit
    assert _as_tuples(examples) == want and stats.to_dict() == want_stats
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(path) in m and "damaged" in m for m in warned), warned
    again, _ = cache.load(path)  # replaced by a good file
    assert _as_tuples(again) == want
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temp file left


def test_empty_cache_file_is_rebuilt(clean, caplog):
    assert_rebuilt(clean, b"", caplog)


@pytest.mark.parametrize("keep", [1, 30, 0.25, 0.5, 0.75, 0.99, -1])
def test_truncated_cache_file_is_rebuilt(clean, caplog, keep):
    good = clean[2].read_bytes()
    cut = keep if isinstance(keep, int) and keep > 0 else int(len(good) * keep)
    if keep == -1:
        cut = len(good) - 1
    assert_rebuilt(clean, good[:cut], caplog)


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _good_parts(path):
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays["meta"].tobytes())
    return arrays, meta


def _meta(meta) -> np.ndarray:
    return np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)


#: every field of a cache file given the wrong type (or shape, or a length that disagrees)
ARRAY_DAMAGE = {
    "lengths_float": lambda a: {**a, "lengths": a["lengths"].astype(np.float64)},
    "lengths_2d": lambda a: {**a, "lengths": a["lengths"].reshape(1, -1)},
    "lengths_negative": lambda a: {**a, "lengths": -a["lengths"]},
    "lengths_too_long": lambda a: {**a, "lengths": a["lengths"] + 1},
    "input_ids_int64": lambda a: {**a, "input_ids": a["input_ids"].astype(np.int64)},
    "input_ids_short": lambda a: {**a, "input_ids": a["input_ids"][:-1]},
    "labels_float": lambda a: {**a, "labels": a["labels"].astype(np.float32)},
    "labels_scalar": lambda a: {**a, "labels": np.int32(3)},
    "meta_int32": lambda a: {**a, "meta": a["meta"].astype(np.int32)},
    "meta_not_json": lambda a: {**a, "meta": np.frombuffer(b"{not json", dtype=np.uint8)},
    "meta_bad_utf8": lambda a: {**a, "meta": np.frombuffer(b'{"ids": "\xff"}', dtype=np.uint8)},
    "no_labels": lambda a: {k: v for k, v in a.items() if k != "labels"},
    "extra_array": lambda a: {**a, "other": np.zeros(2)},
}
META_DAMAGE = {
    "meta_list": lambda m: [m],
    "ids_str": lambda m: {**m, "ids": "abc"},
    "ids_ints": lambda m: {**m, "ids": list(range(len(m["ids"])))},
    "ids_short": lambda m: {**m, "ids": m["ids"][:-1]},
    "stages_none": lambda m: {**m, "stages": None},
    "stages_ints": lambda m: {**m, "stages": [1] * len(m["stages"])},
    "truncated_strings": lambda m: {**m, "truncated": ["no"] * len(m["truncated"])},
    "truncated_ints": lambda m: {**m, "truncated": [0] * len(m["truncated"])},
    "no_truncated": lambda m: {k: v for k, v in m.items() if k != "truncated"},
    "stats_list": lambda m: {**m, "stats": [1, 2]},  # was an AttributeError
    "stats_none": lambda m: {**m, "stats": None},
    "stats_missing_key": lambda m: {
        **m,
        "stats": {k: v for k, v in m["stats"].items() if k != "records"},
    },
    "stats_extra_key": lambda m: {**m, "stats": {**m["stats"], "surprise": 1}},
    "stats_count_str": lambda m: {**m, "stats": {**m["stats"], "tokens": "12"}},
    "stats_count_bool": lambda m: {**m, "stats": {**m["stats"], "examples": True}},
    "stats_count_float": lambda m: {**m, "stats": {**m["stats"], "max_tokens": 1.5}},
    "stats_counter_list": lambda m: {**m, "stats": {**m["stats"], "stages": ["map"]}},
    "stats_counter_str_value": lambda m: {**m, "stats": {**m["stats"], "formats": {"x": "1"}}},
}


@pytest.mark.parametrize("damage", sorted(ARRAY_DAMAGE))
def test_cache_array_of_the_wrong_type_is_rebuilt(clean, caplog, damage):
    cache.save(clean[2], *_clean_examples(clean))  # start from a good file
    arrays, _ = _good_parts(clean[2])
    assert_rebuilt(clean, _npz(**ARRAY_DAMAGE[damage](arrays)), caplog)


@pytest.mark.parametrize("damage", sorted(META_DAMAGE))
def test_cache_meta_field_of_the_wrong_type_is_rebuilt(clean, caplog, damage):
    cache.save(clean[2], *_clean_examples(clean))
    arrays, meta = _good_parts(clean[2])
    assert_rebuilt(clean, _npz(**{**arrays, "meta": _meta(META_DAMAGE[damage](meta))}), caplog)


def _clean_examples(clean):
    from chunkwise.train.records import Example, FormatStats

    _, _, _, want, want_stats = clean
    examples = [
        Example(i, s, np.array(ids, np.int32), np.array(lab, np.int32), truncated=t)
        for i, s, t, ids, lab in want
    ]
    stats = FormatStats()
    for k, v in want_stats.items():
        setattr(stats, k, Counter(v) if isinstance(v, dict) else v)
    return examples, stats


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(junk=st.binary(max_size=4096))
def test_random_bytes_in_the_cache_are_rebuilt(clean, caplog, junk):
    assert_rebuilt(clean, junk, caplog)


@settings(max_examples=200, deadline=None)
@given(junk=st.binary(max_size=4096), prefix=st.sampled_from([b"", b"PK\x03\x04", b"\x93NUMPY"]))
def test_load_names_every_failure_cache_damaged(tmp_path_factory, junk, prefix):
    path = tmp_path_factory.mktemp("junk") / "examples-x.npz"
    path.write_bytes(prefix + junk)
    with pytest.raises(cache.CacheDamaged):
        cache.load(path)


def test_save_fsyncs_the_file_renames_then_fsyncs_the_folder(tmp_path, monkeypatch, clean):
    import stat

    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append("fsync-dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "fsync-file")
        real_fsync(fd)

    def replace(a, b):
        events.append("rename")
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    cache.save(tmp_path / "examples-a.npz", *_clean_examples(clean))
    assert events == ["fsync-file", "rename", "fsync-dir"]


def test_a_save_that_fails_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch, clean):
    path = tmp_path / "examples-a.npz"
    cache.save(path, *_clean_examples(clean))
    before = path.read_bytes()

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", boom)
    with pytest.raises(OSError, match="disk full"):
        cache.save(path, *_clean_examples(clean))
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == [path.name]
