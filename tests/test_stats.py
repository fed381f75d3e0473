"""chunkwise.stats against scipy and hand-computed values; a paired test that sees what an
unpaired one cannot."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binomtest, false_discovery_control, norm

from chunkwise.eval.results import bootstrap
from chunkwise.stats import (
    adjust_pvalues,
    bootstrap_interval,
    bootstrap_means,
    corrected_level,
    mcnemar_exact,
    paired_bootstrap,
    percentile_interval,
    wilson_interval,
)


def test_bootstrap_interval_is_the_percentiles_of_resampled_means():
    x = [1.0] * 30 + [0.0] * 70
    rng = np.random.default_rng(7)
    means = np.asarray(x)[rng.integers(0, 100, size=(500, 100))].mean(axis=1)
    assert bootstrap_interval(x, rounds=500, seed=7) == tuple(np.percentile(means, [2.5, 97.5]))
    lo, hi = bootstrap_interval(x, rounds=500, seed=7, level=50)
    assert (lo, hi) == tuple(np.percentile(means, [25, 75]))
    assert math.isnan(bootstrap_interval([])[0])
    assert bootstrap_interval([0.4]) == (0.4, 0.4)


def test_results_json_intervals_are_unchanged_for_a_seed():
    """The interval results.json reports for these scores, seed and rounds (pinned)."""
    b = bootstrap([1.0] * 3 + [0.0] * 7, seed=0)
    assert b["rounds"] == 1000 and b["mean"] == pytest.approx(30.0)
    assert b["ci95"] == pytest.approx([0.0, 60.0])
    assert b["ci95"] == [100 * v for v in bootstrap_interval([1.0] * 3 + [0.0] * 7, seed=0)]


def test_one_resample_read_at_two_levels_nests():
    means = bootstrap_means([0.0, 1.0, 1.0, 0.0, 1.0], rounds=2000, seed=1)
    lo95, hi95 = percentile_interval(means, 95)
    lo99, hi99 = percentile_interval(means, 99)
    assert lo99 <= lo95 <= hi95 <= hi99


@pytest.mark.parametrize("k,n", [(0, 5), (5, 5), (3, 10), (50, 100), (1, 37)])
def test_wilson_matches_scipy_to_its_z(k, n):
    ci = binomtest(k, n).proportion_ci(0.95, method="wilson")
    lo, hi = wilson_interval(k, n)
    # scipy's z is 1.95996...; ours the textbook 1.96 (the published numbers)
    assert lo == pytest.approx(100 * ci.low, abs=2e-3) and hi == pytest.approx(
        100 * ci.high, abs=2e-3
    )
    lo, hi = wilson_interval(k, n, z=float(norm.ppf(0.975)))
    assert lo == pytest.approx(100 * ci.low, abs=1e-9) and hi == pytest.approx(
        100 * ci.high, abs=1e-9
    )


def test_wilson_edges():
    lo, hi = wilson_interval(5, 5)
    assert (round(lo, 1), hi) == (56.6, 100.0)
    lo, hi = wilson_interval(50, 100)
    assert round(lo, 1) == 40.4 and round(hi, 1) == 59.6
    assert wilson_interval(0, 0) == (0.0, 100.0)
    with pytest.raises(ValueError):
        wilson_interval(3, 2)


def test_mcnemar_is_a_sign_test_on_the_discordant_pairs():
    a = [1] * 10 + [1] * 8 + [0] * 2 + [0] * 5
    b = [1] * 10 + [0] * 8 + [1] * 2 + [0] * 5
    # 8 against 2 discordant: 2 * P(X <= 2), X ~ Bin(10, 1/2) = 2 * 56 / 1024
    assert mcnemar_exact(a, b) == pytest.approx(2 * 56 / 1024)
    assert mcnemar_exact(a, b) == pytest.approx(binomtest(2, 10, 0.5).pvalue)
    assert mcnemar_exact([1, 0, 1], [1, 0, 1]) == 1.0
    assert mcnemar_exact([1, 0], [0, 1]) == 1.0
    with pytest.raises(ValueError):
        mcnemar_exact([1], [1, 0])


def test_paired_sees_a_steady_difference_an_unpaired_comparison_misses():
    """Both arms swing widely from example to example (hard and easy documents), and b is
    always 0.05 below a: pairing removes the swing, two separate intervals keep it."""
    rng = np.random.default_rng(0)
    a = list(rng.uniform(0.1, 0.9, size=40))
    b = [x - 0.05 for x in a]
    d = paired_bootstrap(a, b, rounds=2000, seed=0)
    assert d.mean == pytest.approx(0.05) and d.n == 40
    assert d.low > 0 and not d.holds_zero()
    # unpaired: the difference of independently resampled means holds 0
    ma = bootstrap_means(a, rounds=2000, seed=0)
    mb = bootstrap_means(b, rounds=2000, seed=1)
    lo, hi = percentile_interval(ma - mb)
    assert lo < 0 < hi
    with pytest.raises(ValueError):
        paired_bootstrap([1.0], [1.0, 0.0])


def test_corrections_by_hand_and_against_scipy():
    p = [0.01, 0.04, 0.03, 0.2]
    assert adjust_pvalues(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.8])
    # Holm: sorted 0.01*4, 0.03*3, 0.04*2, 0.2*1, then non-decreasing: .04 .09 .09 .2
    assert adjust_pvalues(p, "holm") == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert adjust_pvalues(p, "bh") == pytest.approx(list(false_discovery_control(p)))
    assert adjust_pvalues(p, "none") == p
    assert adjust_pvalues([0.5, 0.6], "bonferroni") == [1.0, 1.0]
    assert adjust_pvalues([], "holm") == []
    with pytest.raises(ValueError):
        adjust_pvalues(p, "sidak")


def test_corrected_level_widens_each_interval():
    assert corrected_level(95.0, 24) == pytest.approx(100 - 5 / 24)
    assert corrected_level(95.0, 1) == 95.0
    assert corrected_level(95.0, 24, "none") == 95.0


def test_difference_interval_resamples_each_sample_on_its_own():
    from chunkwise.stats import difference_interval

    a, b = [1.0] * 45 + [0.0] * 5, [1.0] * 25 + [0.0] * 25  # 90% against 50%
    diff, lo, hi = difference_interval(a, b)
    assert diff == pytest.approx(0.4) and 0.2 < lo < 0.4 < hi < 0.6
    # a sample with no spread adds none: the interval is the other one's around the difference
    diff, lo, hi = difference_interval([1.0] * 50, [1.0] * 49 + [0.0])
    assert diff == pytest.approx(0.02) and lo == 0.0 and hi == pytest.approx(0.06)
    # unlike a paired interval, different sizes are fine
    assert difference_interval([1.0, 0.0], [1.0] * 3)[0] == pytest.approx(-0.5)
    with pytest.raises(ValueError):
        difference_interval([], [1.0])
