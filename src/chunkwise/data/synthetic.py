"""Synthetic InfiniteBench-style tasks at any length (passkey, number_string, kv_retrieval,
math_find, code_run), built the way InfiniteBench's ``data/construct_synthetic_dataset.py``
builds them, in InfiniteBench's record shape ``{id, context, input, answer, options}``.

What differs from the official files, on purpose:

* The length is a token target measured with the caller's tokenizer (``count_tokens``), not a
  fixed repeat count; the repeated unit (noise line, key-value pair, list element, function) is
  sized with two small probes plus a few exact measurements of a full context. Where the filler
  is random per example (kv_retrieval, math_find, code_run) each example is measured once more
  and re-sized if it lands over 1% off.
* Across the ``n`` examples the needle's depth sweeps 0 → 1 (example ``i`` sits at
  ``i / (n - 1)``; a single example sits in the middle).
* Exactly one needle per context. For math_find that means the answer value occurs once, at the
  needle's depth (the official lists repeat the extreme values many times at random places);
  medians use an odd-length list so the median is that one element (the official answer type
  for medians, float, is kept). For code_run the queried function is the one whose definition
  sits nearest that depth among the chain heads.

Everything is drawn from ``random.Random(seed)``, so a seed always gives the same records.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from chunkwise.errors import BadInput

CountTokens = Callable[[str], int]
T = TypeVar("T")

NOISE = (
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.\n"
)
PASSKEY_NEEDLE = "The pass key is {key}. Remember it. {key} is the pass key.\n"
PASSKEY_QUESTION = "What is the pass key?"
NUMBER_NEEDLE = "The sequence of digits is {key}. Remember it. {key} is the sequence of digits.\n"
NUMBER_QUESTION = "What is the sequence of digits?"
KV_INPUT = '\nKey: "{key}"\nThe value associated with the specified key is: '
MATH_FIND_INPUT = (
    "You should answer with only one number, no other words. The {what} of the list is: "
)
# (official name, order-statistic rank or 0 for the median, largest side?)
MATH_FIND_KINDS: tuple[tuple[str, int, bool], ...] = (
    ("largest number", 1, True),
    ("second largest number", 2, True),
    ("third largest number", 3, True),
    ("smallest number", 1, False),
    ("second smallest number", 2, False),
    ("third smallest number", 3, False),
    ("median number", 0, False),
)
CODE_RUN_HEADER = "\nHere is the content of functions_module.py:\n\n"
CODE_RUN_INPUT = (
    "Please give me the exact number of the return value of func_{j}({x}). "
    "Your response should end with the sentence 'The return value is:'."
)
CODE_RUN_LEVELS = (2, 4, 6, 8, 10)

#: relative error the size search aims for (the contract is 2%; per-example randomness adds a
#: little on top of what the calibration context measures)
_AIM = 0.004
#: an example whose own random filler lands further off than this is re-sized
_EXAMPLE_TOL = 0.01


def needle_depths(n: int) -> list[float]:
    """Depth of the needle in each of ``n`` examples: ``i / (n - 1)``; 0.5 when ``n == 1``."""
    if n == 1:
        return [0.5]
    return [i / (n - 1) for i in range(n)]


@dataclass(frozen=True)
class _Fit:
    size: int  # repeat count of the calibration context closest to the target
    per: float  # tokens one more unit adds (slope near the target)


def _fit_size(
    build: Callable[[int], str],
    target: int,
    count_tokens: CountTokens,
    *,
    probe: int,
    min_size: int = 1,
) -> _Fit:
    """Pick the repeat count ``size`` so that ``count_tokens(build(size))`` is close to ``target``.

    Tokens grow about linearly with size: two small probes give a first slope and offset, then
    at most four measurements at full size refine it (secant steps through the last two points).
    """
    small, large = max(min_size, probe), max(min_size, probe) * 2
    points = [(small, count_tokens(build(small))), (large, count_tokens(build(large)))]
    best: tuple[int, int, float] | None = None  # (error, size, slope)
    for _ in range(4):
        (s0, t0), (s1, t1) = points[-2], points[-1]
        per = (t1 - t0) / (s1 - s0) if s1 != s0 else 0.0
        if per <= 0:
            per = max(t1 / s1, 1e-6)
        size = round(s1 + (target - t1) / per)
        if size < min_size:
            raise BadInput(
                f"a context of {target} tokens is too short for this task: its smallest "
                f"context takes about {points[0][1]} tokens"
            )
        if any(size == s for s, _ in points[2:]):
            break  # no new size to try: granularity reached
        got = count_tokens(build(size))
        err = abs(got - target)
        if best is None or err < best[0]:
            best = (err, size, per)
        if err <= _AIM * target:
            break
        points.append((size, got))
    assert best is not None
    return _Fit(best[1], best[2])


def _settle(
    make: Callable[[int], tuple[str, T]],
    fit: _Fit,
    target: int,
    count_tokens: CountTokens,
    *,
    min_size: int = 1,
) -> T:
    """Build one example at the fitted size and measure it; when its own random filler puts it
    more than 1% off the target, re-size and rebuild it (at most twice). ``make(size)`` must be
    deterministic (it draws from its own seeded generator)."""
    size = fit.size
    best: tuple[int, T] | None = None
    for attempt in range(3):
        context, made = make(size)
        got = count_tokens(context)
        err = abs(got - target)
        if best is None or err < best[0]:
            best = (err, made)
        if err <= _EXAMPLE_TOL * target or attempt == 2:
            break
        step = round((target - got) / fit.per) or (1 if got < target else -1)
        new_size = max(min_size, size + step)
        if new_size == size:
            break
        size = new_size
    assert best is not None
    return best[1]


def _record(i: int, context: str, question: str, answer: Any) -> dict[str, Any]:
    return {"id": i, "context": context, "input": question, "answer": [answer], "options": []}


# --------------------------------------------------------------------------------------------
# passkey and number_string: noise lines around one needle line


def _passkey_key(rng: random.Random) -> str:
    return "".join(str(rng.randint(0, 9)) for _ in range(5))


def _number_key(rng: random.Random) -> str:
    digits = [str(rng.randint(0, 9)) for _ in range(5)]
    for k in range(5):  # duplicate a random digit in place, five times -> 10 digits
        pos = rng.randint(0, 5 + k - 1)
        digits.insert(pos, digits[pos])
    return "".join(digits)


def _noise_context(lines: int, depth: float, needle: str) -> str:
    before = round(depth * lines)
    return NOISE * before + needle + NOISE * (lines - before)


def _needle_task(
    needle_tpl: str,
    question: str,
    make_key: Callable[[random.Random], str],
    length_tokens: int,
    n: int,
    seed: int,
    count_tokens: CountTokens,
) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    probe_needle = needle_tpl.format(key=make_key(random.Random(seed + 1)))
    # examples differ only in the key's digits: one fit serves all, no per-example check
    lines = _fit_size(
        lambda size: _noise_context(size, 0.5, probe_needle),
        length_tokens,
        count_tokens,
        probe=32,
    ).size
    out = []
    for i, depth in enumerate(needle_depths(n)):
        key = make_key(rng)
        out.append(
            _record(i, _noise_context(lines, depth, needle_tpl.format(key=key)), question, key)
        )
    return out


def gen_passkey(*, length_tokens: int, n: int, seed: int, count_tokens: CountTokens):
    return _needle_task(
        PASSKEY_NEEDLE, PASSKEY_QUESTION, _passkey_key, length_tokens, n, seed, count_tokens
    )


def gen_number_string(*, length_tokens: int, n: int, seed: int, count_tokens: CountTokens):
    return _needle_task(
        NUMBER_NEEDLE, NUMBER_QUESTION, _number_key, length_tokens, n, seed, count_tokens
    )


# --------------------------------------------------------------------------------------------
# kv_retrieval: a JSON object of uuid4 pairs; the gold pair sits at the needle depth


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _kv_pairs(rng: random.Random, count: int) -> list[tuple[str, str]]:
    seen: set[str] = set()
    pairs = []
    while len(pairs) < count:
        k, v = _uuid(rng), _uuid(rng)
        if k in seen or v in seen or k == v:
            continue
        seen.update((k, v))
        pairs.append((k, v))
    return pairs


def _kv_context(pairs: list[tuple[str, str]]) -> str:
    return "JSON data:\n{" + ", ".join(f'"{k}": "{v}"' for k, v in pairs) + "}"


def gen_kv_retrieval(*, length_tokens: int, n: int, seed: int, count_tokens: CountTokens):
    rng = random.Random(seed)
    pool = _kv_pairs(random.Random(seed + 1), 64)

    def build(size: int) -> str:
        # calibration context: cycle a small pool (token cost per pair is what matters)
        return _kv_context([pool[i % len(pool)] for i in range(size)])

    fit = _fit_size(build, length_tokens, count_tokens, probe=16)
    out = []
    for i, depth in enumerate(needle_depths(n)):
        example_seed = rng.getrandbits(64)

        def make(size: int, i=i, depth=depth, example_seed=example_seed) -> tuple[str, dict]:
            pairs = _kv_pairs(random.Random(example_seed), size)
            key, value = pairs[round(depth * (size - 1))]
            context = _kv_context(pairs)
            return context, _record(i, context, KV_INPUT.format(key=key), value)

        out.append(_settle(make, fit, length_tokens, count_tokens))
    return out


# --------------------------------------------------------------------------------------------
# math_find: a list of ints in [0, 99]; one order statistic (or the median) asked


@dataclass(frozen=True)
class _FindList:
    values: list[int]
    answer: int | float


def _find_list(rng: random.Random, kind: int, length: int, depth: float) -> _FindList:
    _, rank, largest = MATH_FIND_KINDS[kind]
    lo, hi = 0, 99
    needle_at = round(depth * (length - 1))
    if rank == 0:
        # median: odd length; half strictly below, half strictly above, the median once
        if rng.random() > 0.5:
            lo = rng.randint(0, int(hi * 0.2))
        else:
            hi = rng.randint(int(hi * 0.8), hi)
        mid = (lo + hi) // 2
        half = (length - 1) // 2
        others = [rng.randint(lo, mid - 1) for _ in range(half)]
        others += [rng.randint(mid + 1, hi) for _ in range(half)]
        rng.shuffle(others)
        others.insert(needle_at, mid)
        return _FindList(others, float(mid))
    if largest:
        hi = rng.randint(int(hi * 0.8), hi)
        answer = hi - (rank - 1)
        beyond = list(range(answer + 1, hi + 1))  # the values ranked above the answer
    else:
        lo = rng.randint(lo, int(99 * 0.2))
        answer = lo + (rank - 1)
        beyond = list(range(lo, answer))
    pool = [v for v in range(lo, hi + 1) if v != answer]
    values = [rng.choice(pool) for _ in range(length)]
    free = [p for p in range(length) if p != needle_at]
    for v, p in zip(beyond, rng.sample(free, len(beyond)), strict=True):
        values[p] = v  # each value ranked above the answer is present at least once
    values[needle_at] = answer
    return _FindList(values, answer)


def gen_math_find(*, length_tokens: int, n: int, seed: int, count_tokens: CountTokens):
    rng = random.Random(seed)
    probe_rng = random.Random(seed + 1)
    sample = [probe_rng.randint(0, 99) for _ in range(256)]

    def build(size: int) -> str:
        return str([sample[i % len(sample)] for i in range(size)])

    fit = _fit_size(build, length_tokens, count_tokens, probe=64, min_size=7)
    out = []
    for i, depth in enumerate(needle_depths(n)):
        kind = i % len(MATH_FIND_KINDS)
        example_seed = rng.getrandbits(64)

        def make(size: int, i=i, kind=kind, depth=depth, example_seed=example_seed):
            if MATH_FIND_KINDS[kind][1] == 0 and size % 2 == 0:
                size += 1  # a median needs an odd length
            made = _find_list(random.Random(example_seed), kind, size, depth)
            context = str(made.values)
            what = MATH_FIND_KINDS[kind][0]
            return context, _record(i, context, MATH_FIND_INPUT.format(what=what), made.answer)

        out.append(_settle(make, fit, length_tokens, count_tokens, min_size=7))
    return out


# --------------------------------------------------------------------------------------------
# code_run: levels of functions, each calling one of the next level, the last returning x ± c


@dataclass(frozen=True)
class _Program:
    source: str
    heads: list[int]  # the first level's function ids, in source order
    order: dict[int, int]  # function id -> position in the source
    calls: dict[int, tuple[int | None, int]]  # id -> (callee id or None for x, addition)


def _offset_text(expr: str, add: int) -> str:
    if add == 0:
        return expr
    return f"{expr} - {-add}" if add < 0 else f"{expr} + {add}"


def _program(rng: random.Random, levels: int, total: int) -> _Program:
    """``total`` functions in ``levels`` tiers (sizes differ by at most one), ids drawn without
    repeats from [1, 2 * total] like the official 550 functions from [1, 1100]."""
    ids = rng.sample(range(1, 2 * total + 1), total)
    cuts = [round(k * total / levels) for k in range(levels + 1)]
    tiers = [ids[cuts[k] : cuts[k + 1]] for k in range(levels)]
    calls: dict[int, tuple[int | None, int]] = {}
    for k, tier in enumerate(tiers):
        for fid in tier:
            callee = rng.choice(tiers[k + 1]) if k + 1 < levels else None
            calls[fid] = (callee, rng.randint(-12, 17))
    ordered = sorted(calls)
    parts = []
    for fid in ordered:
        callee, add = calls[fid]
        expr = f"func_{callee}(x)" if callee is not None else "x"
        parts.append(f"def func_{fid}(x):\n    return {_offset_text(expr, add)}\n\n")
    order = {fid: pos for pos, fid in enumerate(ordered)}
    heads = sorted(tiers[0], key=order.__getitem__)
    return _Program(CODE_RUN_HEADER + "".join(parts), heads, order, calls)


def _run(program: _Program, fid: int, x: int) -> int:
    value = x
    node: int | None = fid
    while node is not None:
        node, add = program.calls[node]
        value += add
    return value


def gen_code_run(*, length_tokens: int, n: int, seed: int, count_tokens: CountTokens):
    rng = random.Random(seed)
    depths = needle_depths(n)
    plan = [CODE_RUN_LEVELS[i % len(CODE_RUN_LEVELS)] for i in range(n)]
    fits: dict[int, _Fit] = {}
    for levels in sorted(set(plan)):  # the last level's functions are shorter: fit per depth
        fits[levels] = _fit_size(
            lambda size, lv=levels: _program(random.Random(f"{seed}/{lv}"), lv, size).source,
            length_tokens,
            count_tokens,
            probe=40,
            min_size=levels,
        )
    out = []
    for i, (levels, depth) in enumerate(zip(plan, depths, strict=True)):
        example_seed = rng.getrandbits(64)

        def make(size: int, i=i, levels=levels, depth=depth, example_seed=example_seed):
            ex_rng = random.Random(example_seed)
            program = _program(ex_rng, levels, size)
            want = depth * (len(program.order) - 1)
            head = min(program.heads, key=lambda f: abs(program.order[f] - want))
            x = ex_rng.randint(-10, 10)
            question = CODE_RUN_INPUT.format(j=head, x=x)
            return program.source, _record(i, program.source, question, _run(program, head, x))

        out.append(_settle(make, fits[levels], length_tokens, count_tokens, min_size=levels))
    return out


GENERATORS: dict[str, Callable[..., list[dict[str, Any]]]] = {
    "passkey": gen_passkey,
    "number_string": gen_number_string,
    "kv_retrieval": gen_kv_retrieval,
    "math_find": gen_math_find,
    "code_run": gen_code_run,
}


def generate(
    task: str, *, length_tokens: int, n: int, seed: int, count_tokens: CountTokens
) -> list[dict[str, Any]]:
    """``n`` records of ``task`` whose contexts each take about ``length_tokens`` tokens."""
    gen = GENERATORS.get(task)
    if gen is None:
        raise BadInput(f"no generator for task {task!r}; available: {', '.join(GENERATORS)}")
    if length_tokens <= 0:
        raise BadInput(f"length must be a positive number of tokens, got {length_tokens}")
    if n <= 0:
        raise BadInput(f"n must be at least 1, got {n}")
    return gen(length_tokens=length_tokens, n=n, seed=seed, count_tokens=count_tokens)


def passkey_query(record: dict[str, Any]) -> Any:
    """The strategy query for a passkey record: the question, answered after a fixed prefix."""
    from chunkwise.strategies import Query

    return Query(record["input"], "retrieval", answer_prefix="The pass key is", max_answer_tokens=6)
