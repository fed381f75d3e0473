"""Where the evidence is, per benchmark: spans recorded by the generators (generated families,
RULER), located for InfiniteBench's retrieval tasks and math_find, extractive QA's verbatim
answers, unknown elsewhere; and checked when read back from a file."""

from __future__ import annotations

import json

import pytest

from chunkwise.benchmarks import get_benchmark
from chunkwise.errors import BadInput


def count(text: str) -> int:
    return len(text) // 4


def load(bench, task, data, n=2):
    b = get_benchmark(bench)
    td = b.load(task, b.parse_data(data), limit=n, revision=None, seed=0, count_tokens=count)
    return b, td.examples


@pytest.mark.parametrize(
    ("task", "holds"),
    [
        ("passkey", lambda ex, t: t.startswith("The pass key is") and ex["answer"]["answer"] in t),
        ("kv_retrieval", lambda ex, t: ex["answer"]["answer"] in t),
        ("conflicting", lambda ex, t: True),
        ("multihop", lambda ex, t: t.startswith("Note about") or "note about" in t),
    ],
)
def test_generated_families_record_their_evidence(task, holds):
    b, examples = load("generated", task, "heldout:1000")
    for ex in examples:
        spans = b.evidence(task, ex)
        assert spans, ex["id"]
        for s, e in spans:
            assert holds(ex, ex["context"][s:e]), ex["context"][s:e]


def test_generated_math_find_is_unknown():
    b, examples = load("generated", "math_find", "heldout:1000")
    assert all(b.evidence("math_find", ex) is None for ex in examples)


@pytest.mark.parametrize(
    ("task", "expect"),
    [
        ("niah_single_1", lambda ex, t: ex["answer"][0] in t and "special magic" in t),
        ("niah_multivalue", lambda ex, t: any(a in t for a in ex["answer"])),
        ("vt", lambda ex, t: t.startswith("VAR ")),
    ],
)
def test_ruler_needles_are_recorded_where_they_were_placed(task, expect):
    b, examples = load("ruler", task, "synthetic:600")
    for ex in examples:
        spans = b.evidence(task, ex)
        texts = [ex["context"][s:e] for s, e in spans]
        assert texts and all(expect(ex, t) for t in texts)
        if task == "niah_multivalue":  # every value's needle, and only those
            assert sorted(a for a in ex["answer"] for t in texts if a in t) == sorted(ex["answer"])


def test_ruler_word_counting_tasks_are_unknown():
    b, examples = load("ruler", "cwe", "synthetic:600", n=1)
    assert b.evidence("cwe", examples[0]) is None


def test_ruler_files_keep_and_check_their_spans(tmp_path):
    b, examples = load("ruler", "niah_single_1", "synthetic:600", n=1)
    rec = dict(examples[0])
    (tmp_path / "niah_single_1.jsonl").write_text(json.dumps(rec) + "\n")
    _, back = load("ruler", "niah_single_1", str(tmp_path), n=1)
    assert b.evidence("niah_single_1", back[0]) == b.evidence("niah_single_1", examples[0])
    rec["evidence"] = [[0, 10**9]]
    (tmp_path / "niah_single_1.jsonl").write_text(json.dumps(rec) + "\n")
    with pytest.raises(BadInput, match=r"niah_single_1.jsonl:1: id 0: evidence must be"):
        load("ruler", "niah_single_1", str(tmp_path), n=1)


@pytest.mark.parametrize("task", ["passkey", "number_string", "kv_retrieval", "math_find"])
def test_infinitebench_locates_the_answer(task):
    b, examples = load("infinitebench", task, "synthetic:800")
    for ex in examples:
        spans = b.evidence(task, ex)
        gold = [
            str(a) for a in (ex["answer"] if isinstance(ex["answer"], list) else [ex["answer"]])
        ]
        assert spans and all(ex["context"][s:e] in gold for s, e in spans)


def test_infinitebench_other_tasks_and_free_form_benchmarks_are_unknown():
    b = get_benchmark("infinitebench")
    ex = {"id": 1, "context": "a story with 42 in it", "answer": ["42"], "input": "", "options": []}
    assert b.evidence("longbook_qa_eng", ex) is None
    assert b.evidence("passkey", ex) == [(13, 15)]
    assert get_benchmark("narrativeqa").evidence("narrativeqa", ex) is None


def test_extractive_qa_answers_are_located_where_verbatim():
    q = get_benchmark("qasper")
    ex = {"id": "q", "context": "We use BERT base here.", "input": "", "options": [],
          "answer": [{"answer": "BERT base", "type": "extractive"},
                     {"answer": "Yes", "type": "boolean"}]}  # fmt: skip
    assert q.evidence("qasper", ex) == [(7, 16)]
    ex["answer"] = [{"answer": "a transformer", "type": "abstractive"}]
    assert q.evidence("qasper", ex) is None  # free-form: unknown, never a guess
