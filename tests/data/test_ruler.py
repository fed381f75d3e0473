"""RULER-style generators: exact length with real tokenizers, answers present as stated,
resolvable variable chains, correct word counts, needle depths, determinism, 1M tokens."""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest

from chunkwise.data import ruler
from chunkwise.data.ruler import words as ruler_words
from chunkwise.errors import BadInput
from chunkwise.text import WordPieceCounter
from chunkwise.text.tokens import HFTokenCounter

TASKS = list(ruler.TASKS)
COUNTER = WordPieceCounter()
NIAH = [t for t in TASKS if t.startswith("niah")]


class Counting:
    """A token counter that counts how often it is asked (the generators must not tokenize a
    long context over and over)."""

    def __init__(self, count):
        self.count, self.calls = count, 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return self.count(text)


_made: dict[tuple, list[dict]] = {}


def make(task: str, length: int = 3000, n: int = 5, seed: int = 0) -> list[dict]:
    key = (task, length, n, seed)
    if key not in _made:
        _made[key] = ruler.generate(
            task, length_tokens=length, n=n, seed=seed, count_tokens=COUNTER.count_tokens
        )
    return _made[key]


def check_lengths(counter, tasks, length: int, n: int) -> None:
    for task in tasks:
        count = Counting(counter.count_tokens)
        recs = ruler.generate(task, length_tokens=length, n=n, seed=1, count_tokens=count)
        assert len(recs) == n
        for r in recs:
            got = counter.count_tokens(r["context"])
            assert abs(got - length) <= 0.02 * length, (task, length, got)
            assert r["meta"]["tokens"] == got
        # two probes, at most four full-size fits, then one measurement per further example
        assert count.calls <= 6 + n + 2, (task, count.calls)


@pytest.mark.parametrize("length", [4096, 32768])
def test_length_within_2_percent_real_bpe(tiny_tokenizer, length):
    check_lengths(HFTokenCounter(tiny_tokenizer), TASKS, length, n=2)


def test_length_within_2_percent_gemma_128k(gemma_tokenizer):
    """At 128K with the embedded model's own tokenizer: one task per haystack and kind."""
    tasks = ("niah_single_1", "niah_single_2", "niah_multikey_3", "vt", "cwe", "fwe")
    check_lengths(HFTokenCounter(gemma_tokenizer), tasks, 131072, n=1)


def test_a_million_tokens_in_seconds():
    """1M-token contexts with a fast counter (4 characters a token): sizing stays cheap."""

    def fast(text: str) -> int:
        return len(text) // 4

    t0 = time.perf_counter()
    for task in ("niah_single_2", "niah_multikey_2", "niah_multiquery", "vt"):
        count = Counting(fast)
        (r,) = ruler.generate(task, length_tokens=1_000_000, n=1, seed=0, count_tokens=count)
        assert abs(fast(r["context"]) - 1_000_000) <= 20_000, task
        assert count.calls <= 6, (task, count.calls)
        assert all(a in r["context"] for a in r["answer"])
    assert time.perf_counter() - t0 < 30  # a generous ceiling; ~2 s on 2 cores


@pytest.mark.parametrize("task", TASKS)
def test_deterministic_with_a_seed(task):
    a = make(task, n=2, seed=7)
    b = ruler.generate(task, length_tokens=3000, n=2, seed=7, count_tokens=COUNTER.count_tokens)
    assert a == b
    c = make(task, n=2, seed=8)
    assert [r["context"] for r in c] != [r["context"] for r in a]
    assert [r["answer"] for r in c] != [r["answer"] for r in a]


@pytest.mark.parametrize("task", NIAH)
def test_niah_answers_are_in_their_needles(task):
    spec = ruler.TASKS[task]
    fmt = ruler.templates()["needles"]["niah"]
    _, one = ruler.KIND_NAMES[spec.value]
    for r in make(task):
        ctx, meta = r["context"], r["meta"]
        keys = re.split(r",\s*(?:and\s+)?|\s+and\s+", meta["query"])
        assert len(keys) == spec.queries
        assert len(r["answer"]) == spec.queries * spec.values == meta["count"]
        per_key = len(r["answer"]) // len(keys)
        for k, key in enumerate(keys):
            values = r["answer"][k * per_key : (k + 1) * per_key]
            for v in values:
                assert ctx.count(fmt.format(kind_one=one, key=key, value=v)) == 1
                assert ctx.count(v) == 1  # the value nowhere else
            # the asked key is in its own needles only (distractors never reuse it)
            assert ctx.count(f" for {key} is: ") == per_key
        # every needle the context holds is one of the generated ones
        found = re.findall(rf"A special magic {one} for (\S+) is: ", ctx)
        if spec.haystack != "needle":
            assert len(found) == max(spec.keys, spec.queries) * spec.values
        else:
            assert len(found) > 50  # a haystack of distractor needles
        assert r["input"] == ruler.render_question(task, meta, "chat")


def test_distractors_never_reuse_an_asked_key(monkeypatch):
    """With four possible keys, distractor needles must use the three that are not asked."""
    monkeypatch.setattr(ruler_words, "ADJECTIVES", ("red", "blue"))
    monkeypatch.setattr(ruler_words, "NOUNS", ("fox", "owl"))
    for r in ruler.generate(
        "niah_multikey_2", length_tokens=2000, n=3, seed=0, count_tokens=COUNTER.count_tokens
    ):
        key = r["meta"]["query"]
        assert r["context"].count(f" for {key} is: ") == 1
        assert r["context"].count(" is: ") > 50


def test_needle_depth_sweeps_the_document():
    recs = make("niah_single_1", n=5)
    for r, want in zip(recs, [0.0, 0.25, 0.5, 0.75, 1.0], strict=True):
        where = r["context"].index(r["answer"][0]) / len(r["context"])
        assert abs(where - want) < 0.03, (where, want)
        assert r["meta"]["depths"] == [want]
    # essay haystacks put needles at sentence ends
    for r in make("niah_single_2", n=5)[1:-1]:
        start = r["context"].index("A special magic")
        assert r["context"][start - 2] in ".!?"
    # several needles take distinct depths
    for r in make("niah_multivalue"):
        depths = r["meta"]["depths"]
        assert len(set(depths)) == len(depths) == 4


def resolve(name: str, value_of: dict[str, str], copy_of: dict[str, str]) -> str:
    while name in copy_of:
        name = copy_of[name]
    return value_of[name]


def test_variable_chains_resolve_to_the_answer():
    for r in make("vt", n=4):
        value_of: dict[str, str] = {}
        copy_of: dict[str, str] = {}
        for line in r["context"].splitlines():
            if m := re.fullmatch(r"VAR ([A-Z]{5}) = (\d{5})", line):
                value_of[m.group(1)] = m.group(2)
            elif m := re.fullmatch(r"VAR ([A-Z]{5}) = VAR ([A-Z]{5})", line):
                assert m.group(2) in value_of or m.group(2) in copy_of  # defined earlier
                copy_of[m.group(1)] = m.group(2)

        holders = sorted(
            v for v in [*value_of, *copy_of] if resolve(v, value_of, copy_of) == r["meta"]["query"]
        )
        assert holders == sorted(r["answer"]) and len(holders) == 5
        assert all(f"VAR {a} " in r["context"] for a in r["answer"])


@pytest.mark.parametrize("length,freqs", [(2000, (6, 1)), (4096, (30, 3))])
def test_common_words_counts(length, freqs):
    for r in make("cwe", length=length, n=2):
        entries = re.findall(r"(\d+)\. (\S+)", r["context"])
        assert [int(i) for i, _ in entries] == list(range(1, len(entries) + 1))
        counts = Counter(w for _, w in entries)
        assert {w: counts[w] for w in r["answer"]} == {w: freqs[0] for w in r["answer"]}
        assert set(counts[w] for w in counts if w not in r["answer"]) == {freqs[1]}
        assert sorted(w for w, _ in counts.most_common(10)) == sorted(r["answer"])
        assert r["meta"]["frequencies"] == list(freqs)


def test_common_words_beyond_the_real_word_list_stay_distinct():
    import random

    words = ruler_words.sample_words(random.Random(0), 30_000)
    assert len(set(words)) == 30_000
    assert len(ruler.reference_words()) < 30_000  # made-up words joined in


def test_frequent_words_ranks():
    for r in make("fwe", n=2):
        counts = Counter(r["context"].split(" "))
        ranked = [w for w, _ in counts.most_common(5)]
        assert ranked[0] == "..."
        assert ranked[1:4] == r["answer"]
        top = [c for _, c in counts.most_common(5)]
        assert top == sorted(set(top), reverse=True)  # strictly decreasing: no ties
        assert top == r["meta"]["counts"]


def test_zeta():
    assert ruler.zeta(2.0) == pytest.approx(3.14159265358979**2 / 6, rel=1e-9)
    with pytest.raises(BadInput):
        ruler.zeta(1.0)


def test_keys_never_contain_one_another():
    adj, nouns = ruler.ADJECTIVES, ruler.NOUNS
    assert len(set(adj)) == len(adj) and len(set(nouns)) == len(nouns)
    assert not [(a, b) for a in adj for b in adj if a != b and b.endswith(a)]
    assert not [(a, b) for a in nouns for b in nouns if a != b and b.startswith(a)]


def test_bad_input():
    with pytest.raises(BadInput, match="no RULER task"):
        ruler.generate("nope", length_tokens=100, n=1, seed=0, count_tokens=len)
    with pytest.raises(BadInput, match="too short"):
        ruler.generate("cwe", length_tokens=5, n=1, seed=0, count_tokens=COUNTER.count_tokens)
    with pytest.raises(BadInput, match="n must"):
        ruler.generate("vt", length_tokens=500, n=0, seed=0, count_tokens=len)
