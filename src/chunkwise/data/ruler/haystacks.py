"""The haystacks needles are hidden in: noise lines, Python's language reference as an essay
(needles at sentence ends), or distractor needles; and RULER's grid of needle depths."""

from __future__ import annotations

import bisect
import random
import re
from collections.abc import Callable
from functools import cache

from chunkwise.data.synthetic import NOISE

NOISE_LINE = NOISE.strip()
#: RULER's needle depths: 40 points from 0% to 100% of the document
DEPTH_GRID = tuple(k / 39 for k in range(40))


def insert(units: list[str], placed: list[tuple[int, str]]) -> list[str]:
    """``units`` with each ``(position, text)`` put before unit ``position`` (stable order)."""
    out: list[str] = []
    prev = 0
    for pos, text in sorted(placed, key=lambda p: p[0]):
        out.extend(units[prev:pos])
        out.append(text)
        prev = pos
    out.extend(units[prev:])
    return out


def _noise_haystack(size: int, needles, rng, distractor) -> str:
    units = [NOISE_LINE] * size
    return "\n".join(insert(units, [(round(d * size), t) for d, t in needles]))


def _needle_haystack(size: int, needles, rng, distractor) -> str:
    units = [distractor(rng) for _ in range(size)]
    return "\n".join(insert(units, [(round(d * size), t) for d, t in needles]))


@cache
def essay() -> tuple[tuple[str, ...], tuple[int, ...], str]:
    """Python's reference topics as one word stream: (words, insertion points after a sentence
    end, the text once)."""
    import pydoc_data.topics as topics

    text = " ".join(v for _, v in sorted(topics.topics.items()) if v.strip())
    words = tuple(re.sub(r"\s+", " ", text).strip().split(" "))
    ends = tuple(i + 1 for i, w in enumerate(words) if len(w) > 1 and w[-1] in ".!?")
    return words, ends, " ".join(words)


def _sentence_point(target: int, size: int) -> int:
    """The insertion point nearest ``target`` that follows a sentence end (cycles repeat)."""
    words, ends, _ = essay()
    if target <= 0 or size <= 0:
        return 0
    if target >= size:
        return size
    base = target - target % len(words)
    j = bisect.bisect_left(ends, target - base)
    cands = [base]  # a cycle starts after the previous cycle's last sentence
    if j < len(ends):
        cands.append(base + ends[j])
    if j > 0:
        cands.append(base + ends[j - 1])
    return min((c for c in cands if 0 <= c <= size), key=lambda c: abs(c - target))


def _essay_haystack(size: int, needles, rng, distractor) -> str:
    words = essay()[0]
    reps = -(-size // len(words))
    units = list(words * reps)[:size] if reps > 1 else list(words[:size])
    placed = [(_sentence_point(round(d * size), size), t) for d, t in needles]
    return " ".join(insert(units, placed))


HAYSTACKS: dict[str, Callable[..., str]] = {
    "noise": _noise_haystack,
    "essay": _essay_haystack,
    "needle": _needle_haystack,
}


def grid_depths(rng: random.Random, count: int, first: float) -> list[float]:
    """``count`` distinct grid depths, avoiding the grid point nearest ``first``."""
    near = min(DEPTH_GRID, key=lambda g: abs(g - first))
    grid = [g for g in DEPTH_GRID if g != near]
    if count <= len(grid):
        return rng.sample(grid, count)
    return [rng.random() for _ in range(count)]
