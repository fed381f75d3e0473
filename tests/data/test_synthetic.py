"""Synthetic InfiniteBench generators: length, one needle, answers, depth sweep, determinism."""

from __future__ import annotations

import ast
import re
import time

import pytest

from chunkwise.benchmarks.infinitebench.metrics import score_one
from chunkwise.data import synthetic
from chunkwise.data.synthetic import GENERATORS, generate, needle_depths
from chunkwise.errors import BadInput
from chunkwise.text import WordPieceCounter

COUNTER = WordPieceCounter()
TASKS = ["passkey", "number_string", "kv_retrieval", "math_find", "code_run"]
LENGTH = 3000
N = 7


class CountingCounter:
    def __init__(self):
        self.calls = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return COUNTER.count_tokens(text)


_made: dict[tuple, list[dict]] = {}


def make(task: str, length: int = LENGTH, n: int = N, seed: int = 0) -> list[dict]:
    key = (task, length, n, seed)
    if key not in _made:
        _made[key] = generate(
            task, length_tokens=length, n=n, seed=seed, count_tokens=COUNTER.count_tokens
        )
    return _made[key]


def needle_position(task: str, rec: dict) -> tuple[float, int]:
    """(relative position of the needle's first occurrence, how many times it occurs)."""
    ctx, ans = rec["context"], rec["answer"][0]
    if task == "passkey":
        needle = synthetic.PASSKEY_NEEDLE.format(key=ans)
    elif task == "number_string":
        needle = synthetic.NUMBER_NEEDLE.format(key=ans)
    elif task == "kv_retrieval":
        key = re.search(r'Key: "([^"]+)"', rec["input"]).group(1)
        needle = f'"{key}": "{ans}"'
    elif task == "math_find":
        values = ast.literal_eval(ctx)
        hits = [i for i, v in enumerate(values) if v == ans]
        return (hits[0] / len(values) if hits else -1.0), len(hits)
    else:  # code_run: the queried function's definition
        fid = re.search(r"func_(\d+)\(", rec["input"]).group(1)
        needle = f"def func_{fid}(x):"
    return ctx.find(needle) / len(ctx), ctx.count(needle)


def test_registry():
    assert sorted(GENERATORS) == sorted(TASKS)


def test_depths():
    assert needle_depths(1) == [0.5]
    assert needle_depths(5) == [0.0, 0.25, 0.5, 0.75, 1.0]


@pytest.mark.parametrize("task", TASKS)
def test_official_record_layout(task):
    for i, rec in enumerate(make(task)):
        assert list(rec) == ["id", "context", "input", "answer", "options"]
        assert rec["id"] == i
        assert rec["options"] == []
        assert isinstance(rec["answer"], list)
        assert len(rec["answer"]) == 1
        assert isinstance(rec["context"], str)
        assert isinstance(rec["input"], str)


@pytest.mark.parametrize("task", TASKS)
@pytest.mark.parametrize("length", [1500, LENGTH, 12000])
def test_length_within_two_percent(task, length):
    for rec in make(task, length=length):
        got = COUNTER.count_tokens(rec["context"])
        assert abs(got - length) <= 0.02 * length, (rec["id"], got)


@pytest.mark.parametrize("task", TASKS)
def test_exactly_one_needle_swept_through_depth(task):
    recs = make(task)
    positions = []
    for rec in recs:
        pos, count = needle_position(task, rec)
        assert count == 1, rec["id"]
        positions.append(pos)
    # depth i / (n - 1): from the start to the end, in order
    assert positions[0] < 0.05
    assert positions[-1] > 0.9
    if task != "code_run":  # code_run contexts differ per example; only roughly ordered
        assert positions == sorted(positions)
        for rel, depth in zip(positions, needle_depths(len(recs)), strict=True):
            assert abs(rel - depth) < 0.03
    else:
        assert positions[len(positions) // 2] == pytest.approx(0.5, abs=0.15)


def test_passkey_and_number_string_keys():
    for rec in make("passkey"):
        key = rec["answer"][0]
        assert re.fullmatch(r"\d{5}", key)
        assert rec["input"] == "What is the pass key?"
        # the noise has no digits: the key's digits occur only in the needle (twice)
        assert re.findall(r"\d+", rec["context"]) == [key, key]
        assert rec["context"].startswith(synthetic.NOISE) or rec["id"] == 0
    for rec in make("number_string"):
        key = rec["answer"][0]
        assert re.fullmatch(r"\d{10}", key)
        # built from 5 digits by duplicating one in place five times: adjacent repeats exist
        assert re.search(r"(\d)\1", key)


def test_kv_retrieval_value_belongs_to_key():
    for rec in make("kv_retrieval"):
        data = rec["context"]
        assert data.startswith('JSON data:\n{"') and data.endswith('"}')
        pairs = re.findall(r'"([0-9a-f-]{36})": "([0-9a-f-]{36})"', data)
        keys = [k for k, _ in pairs]
        assert len(set(keys)) == len(keys)
        asked = re.search(r'Key: "([^"]+)"', rec["input"]).group(1)
        assert dict(pairs)[asked] == rec["answer"][0]
        assert rec["input"].endswith("The value associated with the specified key is: ")


def test_math_find_answer_is_the_asked_statistic():
    kinds_seen = set()
    for rec in make("math_find", n=14):
        values = ast.literal_eval(rec["context"])
        assert all(0 <= v <= 99 for v in values)
        what = re.search(r"The (.+) of the list is: $", rec["input"]).group(1)
        kinds_seen.add(what)
        distinct = sorted(set(values))
        expect = {
            "largest number": distinct[-1],
            "second largest number": distinct[-2],
            "third largest number": distinct[-3],
            "smallest number": distinct[0],
            "second smallest number": distinct[1],
            "third smallest number": distinct[2],
        }
        if what == "median number":
            assert len(values) % 2 == 1
            assert isinstance(rec["answer"][0], float)
            assert rec["answer"][0] == sorted(values)[len(values) // 2]
        else:
            assert isinstance(rec["answer"][0], int)
            assert rec["answer"][0] == expect[what]
    assert len(kinds_seen) == 7


def test_code_run_answer_matches_execution():
    for rec in make("code_run", n=5):
        namespace: dict = {}
        source = rec["context"].removeprefix(synthetic.CODE_RUN_HEADER)
        exec(source, namespace)  # our own generated source: plain arithmetic functions
        call = re.search(r"(func_\d+)\((-?\d+)\)", rec["input"])
        assert namespace[call.group(1)](int(call.group(2))) == rec["answer"][0]
        assert rec["context"].startswith(synthetic.CODE_RUN_HEADER)
        assert rec["input"].endswith("'The return value is:'.")
    # the chain depth cycles through the official 2, 4, 6, 8, 10 levels
    sources = [r["context"] for r in make("code_run", n=5)]
    last_level = [len(re.findall(r"return x\b", s)) / s.count("def ") for s in sources]
    assert last_level == sorted(last_level, reverse=True)


@pytest.mark.parametrize("task", TASKS)
def test_answers_score_with_the_official_rules(task):
    for rec in make(task):
        ans = rec["answer"][0]
        assert score_one(task, str(ans), rec["answer"]) == 1.0
        assert score_one(task, "I do not know", rec["answer"]) == 0.0


@pytest.mark.parametrize("task", TASKS)
def test_seeded_determinism(task):
    a = generate(task, length_tokens=1500, n=3, seed=7, count_tokens=COUNTER.count_tokens)
    b = generate(task, length_tokens=1500, n=3, seed=7, count_tokens=COUNTER.count_tokens)
    c = generate(task, length_tokens=1500, n=3, seed=8, count_tokens=COUNTER.count_tokens)
    assert a == b
    assert [r["answer"] for r in a] != [r["answer"] for r in c]


@pytest.mark.parametrize("task", TASKS)
def test_few_token_counts(task):
    counter = CountingCounter()
    generate(task, length_tokens=LENGTH, n=10, seed=0, count_tokens=counter)
    # a handful of calls per fitted size (code_run fits one size per chain depth: 5 of them)
    per_example = 0 if task in ("passkey", "number_string") else 3 * 10
    assert counter.calls <= (30 if task == "code_run" else 6) + per_example


@pytest.mark.parametrize("task", ["passkey", "kv_retrieval"])
def test_128k_context_is_fast(task):
    counter = CountingCounter()
    start = time.perf_counter()
    recs = generate(task, length_tokens=128_000, n=3, seed=0, count_tokens=counter)
    elapsed = time.perf_counter() - start
    assert elapsed < 20  # about 1 s here; generous for a busy shared machine
    got = COUNTER.count_tokens(recs[1]["context"])
    assert abs(got - 128_000) <= 0.02 * 128_000


def test_bad_arguments():
    with pytest.raises(BadInput, match="available: passkey"):
        generate("longbook_qa_eng", length_tokens=1000, n=1, seed=0, count_tokens=len)
    with pytest.raises(BadInput, match="positive"):
        generate("passkey", length_tokens=0, n=1, seed=0, count_tokens=len)
    with pytest.raises(BadInput, match="at least 1"):
        generate("passkey", length_tokens=1000, n=0, seed=0, count_tokens=len)
    with pytest.raises(BadInput, match="too short"):
        generate("kv_retrieval", length_tokens=5, n=1, seed=0, count_tokens=COUNTER.count_tokens)


@pytest.mark.parametrize("task", TASKS)
def test_length_with_a_bpe_tokenizer(task, tiny_tokenizer):
    """A trained byte-level BPE merges across boundaries and splits uuids unevenly: the fit
    must still land within 2% for every example."""

    def count(text: str) -> int:
        return len(tiny_tokenizer(text, add_special_tokens=False)["input_ids"])

    target = 6000
    for rec in generate(task, length_tokens=target, n=4, seed=1, count_tokens=count):
        got = count(rec["context"])
        assert abs(got - target) <= 0.02 * target, (rec["id"], got)


def test_math_find_small_lists_keep_the_rank():
    """With few elements the values ranked above (or below) the answer must still be present,
    or "third largest" would silently become the largest."""
    import random

    for seed in range(150):
        for kind, (what, rank, largest) in enumerate(synthetic.MATH_FIND_KINDS):
            made = synthetic._find_list(random.Random(seed), kind, 7, 0.5)
            values = made.values
            assert values.count(made.answer) == 1
            assert values[3] == made.answer  # depth 0.5 of 7 elements
            distinct = sorted(set(values))
            if rank == 0:
                assert made.answer == sorted(values)[3], what
            elif largest:
                assert made.answer == distinct[-rank], what
            else:
                assert made.answer == distinct[rank - 1], what
