"""Uncertainty of the numbers chunkwise reports: intervals, paired tests and corrections.

results.json and every bench script take their intervals and tests from here, so one seed and
one number of resamples give one interval wherever a number is shown:

* :func:`bootstrap_interval` — percentile bootstrap interval of a mean (the examples resampled
  with replacement); :func:`bootstrap_means` and :func:`percentile_interval` are its two
  steps, for reading one resample at several levels;
* :func:`paired_bootstrap` — the mean of ``a - b`` over the same examples, its interval from
  resampling the examples (both scores of an example stay together): tighter than comparing
  two intervals when the two arms succeed and fail on the same examples;
* :func:`wilson_interval` — a proportion's interval that stays honest at 0 and n successes;
* :func:`mcnemar_exact` — the exact McNemar test of two arms' paired 0/1 outcomes;
* :func:`adjust_pvalues` and :func:`corrected_level` — Bonferroni, Holm or
  Benjamini-Hochberg, for a verdict drawn from many comparisons.

Values keep the units they are given in (0/1 scores give a 0-1 interval); the Wilson interval
is in percent, as the tables show it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

#: resamples of a bootstrap (results.json's intervals)
BOOTSTRAP_ROUNDS = 1000
#: the normal quantile of the Wilson interval: the textbook 1.96 (scipy's ``proportion_ci``
#: uses 1.95996..., which moves about one interval in forty by 0.01 point when rounded to 2
#: decimals; published intervals were computed with 1.96)
WILSON_Z = 1.96
#: multiple-comparison corrections :func:`adjust_pvalues` knows
CORRECTIONS = ("bonferroni", "holm", "bh", "none")


@dataclass(frozen=True)
class PairedDifference:
    """The mean of ``a - b`` over paired examples, with its bootstrap interval."""

    mean: float
    low: float
    high: float
    n: int

    def holds_zero(self) -> bool:
        return self.low <= 0.0 <= self.high


def bootstrap_means(
    values: Sequence[float], *, rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0
) -> np.ndarray:
    """The means of ``rounds`` resamples of ``values`` with replacement (numpy's
    ``default_rng(seed)``): the bootstrap distribution of the mean."""
    x = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    return x[rng.integers(0, len(x), size=(rounds, len(x)))].mean(axis=1)


def percentile_interval(means: np.ndarray, level: float = 95.0) -> tuple[float, float]:
    """The central ``level``% of a bootstrap distribution."""
    tail = (100.0 - level) / 2
    lo, hi = np.percentile(means, [tail, 100.0 - tail])
    return float(lo), float(hi)


def bootstrap_interval(
    values: Sequence[float],
    *,
    level: float = 95.0,
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap ``level``% interval of the mean of ``values``; (nan, nan) when
    there are none."""
    if len(values) == 0:
        return (float("nan"), float("nan"))
    return percentile_interval(bootstrap_means(values, rounds=rounds, seed=seed), level)


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    level: float = 95.0,
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = 0,
) -> PairedDifference:
    """``a - b`` example by example (``a[i]`` and ``b[i]`` score the same example): its mean
    and the percentile bootstrap interval of that mean."""
    if len(a) != len(b):
        raise ValueError(f"paired scores need one of each per example: {len(a)} vs {len(b)}")
    if len(a) == 0:
        raise ValueError("paired scores: no examples")
    d = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    lo, hi = bootstrap_interval(d, level=level, rounds=rounds, seed=seed)
    return PairedDifference(float(np.mean(d)), lo, hi, len(d))


def difference_interval(
    a: Sequence[float],
    b: Sequence[float],
    *,
    level: float = 95.0,
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = 0,
) -> tuple[float, float, float]:
    """``mean(a) - mean(b)`` for two independent samples (different examples, e.g. a published
    cell and a rerun on other documents), with the percentile bootstrap interval that resamples
    each sample on its own."""
    if len(a) == 0 or len(b) == 0:
        raise ValueError("difference_interval: both samples need examples")
    diffs = bootstrap_means(a, rounds=rounds, seed=seed) - bootstrap_means(
        b, rounds=rounds, seed=seed + 1
    )
    lo, hi = percentile_interval(diffs, level)
    return float(np.mean(a) - np.mean(b)), lo, hi


def wilson_interval(successes: int, n: int, *, z: float = WILSON_Z) -> tuple[float, float]:
    """95% Wilson score interval of ``successes`` in ``n``, in percent; (0, 100) for n = 0.
    Unlike a bootstrap it stays honest at the edges: 5 of 5 gives [56.6, 100], not
    [100, 100]."""
    if n <= 0:
        return (0.0, 100.0)
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, {n}], got {successes}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / denom
    return (100.0 * max(0.0, centre - half), 100.0 * min(1.0, centre + half))


def mcnemar_exact(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided exact McNemar p-value of paired 0/1 outcomes: a binomial test (p = 1/2) on
    the examples where exactly one of the two is right; 1.0 when none differ."""
    from scipy.stats import binomtest

    if len(a) != len(b):
        raise ValueError(f"paired outcomes need one of each per example: {len(a)} vs {len(b)}")
    wins = sum(x > y for x, y in zip(a, b, strict=True))
    losses = sum(x < y for x, y in zip(a, b, strict=True))
    if wins + losses == 0:
        return 1.0
    return float(binomtest(min(wins, losses), wins + losses, 0.5).pvalue)


def adjust_pvalues(pvalues: Sequence[float], method: str = "holm") -> list[float]:
    """p-values adjusted for making ``len(pvalues)`` comparisons at once, in the given order:
    ``bonferroni`` (each times the count), ``holm`` (Bonferroni step-down: as strict for the
    smallest, less for the rest; holds the family-wise error like Bonferroni), ``bh``
    (Benjamini-Hochberg: the false discovery rate), ``none``."""
    if method not in CORRECTIONS:
        raise ValueError(f"correction {method!r}: one of {', '.join(CORRECTIONS)}")
    p = np.asarray(pvalues, dtype=float)
    m = len(p)
    if m == 0 or method == "none":
        return [float(x) for x in p]
    if method == "bonferroni":
        return [float(x) for x in np.minimum(1.0, p * m)]
    if method == "bh":
        from scipy.stats import false_discovery_control

        return [float(x) for x in false_discovery_control(p, method="bh")]
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    out = np.empty(m)
    out[order] = np.minimum(1.0, stepped)
    return [float(x) for x in out]


def corrected_level(level: float, comparisons: int, method: str = "bonferroni") -> float:
    """The level of each of ``comparisons`` intervals that holds a verdict on all of them to
    ``level``% (Bonferroni: ``100 - (100 - level) / comparisons``); ``none`` keeps ``level``."""
    if method not in ("bonferroni", "none"):
        raise ValueError(f"interval correction {method!r}: bonferroni or none")
    if method == "none" or comparisons <= 1:
        return level
    return 100.0 - (100.0 - level) / comparisons


__all__ = [
    "BOOTSTRAP_ROUNDS",
    "CORRECTIONS",
    "WILSON_Z",
    "PairedDifference",
    "adjust_pvalues",
    "bootstrap_interval",
    "bootstrap_means",
    "corrected_level",
    "mcnemar_exact",
    "paired_bootstrap",
    "percentile_interval",
    "wilson_interval",
]
