"""``n`` records of a RULER task at a token length: the unit count that sizes the first
context to the target, each example re-sized when its own random content lands off, and the
records numbered in the benchmark shape."""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from typing import Any

from chunkwise.data.ruler.questions import render_question
from chunkwise.data.ruler.tasks import TASKS, Made
from chunkwise.data.ruler.wording import prompt_version
from chunkwise.data.synthetic import needle_depths
from chunkwise.errors import BadInput

CountTokens = Callable[[str], int]

#: relative error the size search aims for (the contract is 2%)
_AIM = 0.004
#: an example whose own random content lands further off than this is re-sized
_EXAMPLE_TOL = 0.01


def _fit(
    build: Callable[[int], str], target: int, count_tokens: CountTokens, min_size: int
) -> tuple[int, float, dict[int, int]]:
    """The unit count whose context is closest to ``target`` tokens, the tokens one unit adds
    near it, and every full-size measurement made ({size: tokens}).

    Two small probes give a first slope; then secant steps on full-size contexts (at most
    four, usually two or three) until one lands within 0.4% of the target.
    """
    s0 = max(min_size, 8)
    t0 = count_tokens(build(s0))
    s1 = max(s0 + 1, round(min(target, 2048) / max(t0 / s0, 1e-6)))
    t1 = count_tokens(build(s1))
    points = [(s0, t0), (s1, t1)]
    measured: dict[int, int] = {}
    per = max(t1 / s1, 1e-6)
    for _ in range(4):
        (a, ta), (b, tb) = points[-2], points[-1]
        per = (tb - ta) / (b - a) if b != a else 0.0
        if per <= 0:
            per = max(tb / b, 1e-6)
        size = round(b + (target - tb) / per)
        if size < min_size:
            raise BadInput(
                f"a context of {target} tokens is too short for this task: its smallest "
                f"context takes about {t0 + round((min_size - s0) * per)} tokens"
            )
        if size in measured:
            break  # granularity reached
        got = count_tokens(build(size))
        measured[size] = got
        points.append((size, got))
        if abs(got - target) <= _AIM * target:
            break
    best = min(measured, key=lambda s: abs(measured[s] - target))
    return best, per, measured


def _generate(
    name: str, *, length_tokens: int, n: int, seed: int, count_tokens: CountTokens
) -> list[dict[str, Any]]:
    spec = TASKS[name]
    rng = random.Random(f"ruler/{name}/{seed}")
    seeds = [rng.getrandbits(64) for _ in range(n)]
    depths = needle_depths(n)

    def build(i: int, size: int) -> Made:
        return spec.make(size, random.Random(seeds[i]), depths[i], length_tokens)

    size, per, measured = _fit(
        lambda s: build(0, s).context, length_tokens, count_tokens, spec.min_size
    )
    out = []
    for i in range(n):
        s, best = size, None
        for attempt in range(3):
            made = build(i, s)
            got = measured[s] if i == 0 and s in measured else count_tokens(made.context)
            err = abs(got - length_tokens)
            if best is None or err < best[0]:
                best = (err, made, got)
            if err <= _EXAMPLE_TOL * length_tokens or attempt == 2:
                break
            step = round((length_tokens - got) / per) or (1 if got < length_tokens else -1)
            s = max(spec.min_size, s + step)
        assert best is not None
        _, made, got = best
        out.append(_record(name, i, made, got))
    return out


def _record(name: str, i: int, made: Made, tokens: int) -> dict[str, Any]:
    meta = {"task": name, **made.meta, "tokens": tokens, "version": prompt_version()}
    rec = {
        "id": i,
        "context": made.context,
        "input": render_question(name, meta, "chat"),
        "answer": list(made.answer),
        "options": [],
        "meta": meta,
    }
    if made.evidence is not None:
        rec["evidence"] = [list(s) for s in made.evidence]
    return rec


GENERATORS: dict[str, Callable[..., list[dict[str, Any]]]] = {
    name: partial(_generate, name) for name in TASKS
}


def generate(
    task: str, *, length_tokens: int, n: int, seed: int, count_tokens: CountTokens
) -> list[dict[str, Any]]:
    """``n`` records of RULER task ``task`` whose contexts each take ~``length_tokens``."""
    gen = GENERATORS.get(task)
    if gen is None:
        raise BadInput(f"no RULER task {task!r}; available: {', '.join(GENERATORS)}")
    if length_tokens <= 0:
        raise BadInput(f"length must be a positive number of tokens, got {length_tokens}")
    if n <= 0:
        raise BadInput(f"n must be at least 1, got {n}")
    return gen(length_tokens=length_tokens, n=n, seed=seed, count_tokens=count_tokens)
