"""Wilson and DeLong intervals, the paired-proportion interval and the KS distance, against worked examples,
brute-force definitions, scipy, and coverage simulations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom, ks_2samp
from sklearn.metrics import roc_auc_score

from detectors.stats import MetricError, intervals


def test_wilson_matches_published_values_and_stays_in_range():
    # Wilson (1927) / Newcombe (1998), table I: 0/10 -> (0, 0.2775); 7/10 -> (0.3968, 0.8922)
    assert intervals.wilson_interval(0, 10)[1:] == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert intervals.wilson_interval(7, 10)[1:] == pytest.approx((0.3968, 0.8922), abs=1e-4)
    assert intervals.wilson_interval(10, 10)[2] == pytest.approx(1.0)
    with pytest.raises(MetricError):
        intervals.wilson_interval(3, 0)


def test_a_wilson_interval_holds_its_own_proportion_on_every_count():
    """At 0/n and n/n the bound and the proportion are the same number computed two ways: rounding put the lower
    bound above 0 (0/7: about 1e-17) and the upper below 1, and a plot of the interval refused its negative arm."""
    for n in range(1, 300):
        for k in range(n + 1):
            p, lo, hi = intervals.wilson_interval(k, n)
            assert 0.0 <= lo <= p <= hi <= 1.0, (k, n, lo, p, hi)


@pytest.mark.parametrize("n", [20, 50, 200])
def test_wilson_exact_coverage_is_within_2_points_of_95(n):
    """Coverage computed exactly from the binomial distribution, averaged over p in [0.05, 0.95]."""
    k = np.arange(n + 1)
    bounds = [intervals.wilson_interval(int(x), n)[1:] for x in k]
    coverage = []
    for p in np.linspace(0.05, 0.95, 91):
        inside = np.array([lo <= p <= hi for lo, hi in bounds])
        coverage.append(binom.pmf(k, n, p)[inside].sum())
    assert abs(np.mean(coverage) - 0.95) < 0.02
    assert min(coverage) > 0.90


def test_delong_variance_of_a_worked_example():
    # X (generated) = 0.9, 0.8, 0.4; Y (real) = 0.7, 0.3. Placements V10 = (1, 1, 1/2), V01 = (2/3, 1);
    # AUC = 5/6; S10 = 1/12, S01 = 1/18; Var = S10/3 + S01/2 = 1/36 + 1/36 = 1/18
    with pytest.raises(MetricError):  # 2 of each class at least
        intervals.delong_covariance([1, 0, 0], np.array([0.9, 0.7, 0.3]))
    aucs, cov = intervals.delong_covariance([1, 1, 1, 0, 0], np.array([0.9, 0.8, 0.4, 0.7, 0.3]))
    assert aucs[0] == pytest.approx(5 / 6) and cov[0, 0] == pytest.approx(1 / 18)


def test_delong_covariance_equals_the_brute_force_definition_with_ties():
    rng = np.random.default_rng(0)
    y = rng.random(80) < 0.4
    a = np.round(rng.normal(size=80) + y, 1)  # rounded: many ties
    b = np.round(a + rng.normal(size=80), 1)
    aucs, cov = intervals.delong_covariance(y, np.stack([a, b]))
    s = np.stack([a, b])
    x, z = s[:, y], s[:, ~y]
    psi = (x[:, :, None] > z[:, None, :]) + 0.5 * (x[:, :, None] == z[:, None, :])
    want = np.cov(psi.mean(2)) / y.sum() + np.cov(psi.mean(1)) / (~y).sum()
    assert aucs == pytest.approx([roc_auc_score(y, a), roc_auc_score(y, b)])
    assert cov == pytest.approx(want, abs=1e-12)


def _binormal(rng, n, shift_a, shift_b, rho):
    y = np.arange(n) < n // 2
    noise = rng.multivariate_normal([0, 0], [[1, rho], [rho, 1]], size=n)
    return y, noise[:, 0] + shift_a * y, noise[:, 1] + shift_b * y


def test_delong_intervals_cover_the_true_auc_and_the_true_paired_difference():
    from scipy.stats import norm

    rng = np.random.default_rng(1)
    true_a, true_b = norm.cdf(1.2 / np.sqrt(2)), norm.cdf(0.6 / np.sqrt(2))  # binormal AUC
    hit_a = hit_diff = 0
    reps = 1000
    for _ in range(reps):
        y, a, b = _binormal(rng, 400, 1.2, 0.6, 0.6)  # asymptotic: at 60 + 60 it covers ~93%
        _, lo, hi = intervals.auc_interval(y, a)
        hit_a += lo <= true_a <= hi
        _, lo, hi = intervals.paired_auc_difference(y, a, b)
        hit_diff += lo <= true_a - true_b <= hi
    assert abs(hit_a / reps - 0.95) < 0.02
    assert abs(hit_diff / reps - 0.95) < 0.02


def test_paired_proportion_interval_covers_a_simulated_recall_drift():
    rng = np.random.default_rng(2)
    reps, hits = 1000, 0
    for _ in range(reps):  # FakeR 0.8 on original, 0.6 under the condition, correlated per video
        u = rng.random(150)
        orig, cond = u < 0.8, (u < 0.6) ^ (rng.random(150) < 0.1)
        truth = 0.6 * 0.9 + 0.4 * 0.1 - 0.8
        _, lo, hi = intervals.paired_proportion_difference(cond, orig)
        hits += lo <= truth <= hi
    assert abs(hits / reps - 0.95) < 0.02


def _pairs(e: int, f: int, g: int, h: int) -> tuple[np.ndarray, np.ndarray]:
    """Paired booleans (a, b) with e pairs where both hold, f only a, g only b, h neither (Newcombe's cells)."""
    counts = [e, f, g, h]
    return np.repeat([True, True, False, False], counts), np.repeat([True, False, True, False], counts)


# Newcombe (1998), Statistics in Medicine 17:2635-2650, table of worked examples, method 10 (95%), as
# (e, f, g, h, lower, upper) with d = (f - g)/n, printed to 4 decimals. Not checked against the paper itself:
# transcribed from two public test files found in a code index that reproduce it (both call it Table III),
# and the row (20, 12, 2, 16) also from petelaud/ratesci tests/testthat/test3.R ("Newcombe's method 10
# result"). Every limit below is reproduced within half a unit of the 4th decimal except the lower limit of
# (1, 97, 1, 1): the formula gives 0.87367, the table 0.8736 (one of the transcriptions also sets it aside).
NEWCOMBE_1998_METHOD_10 = [
    (36, 12, 2, 0, 0.0569, 0.3404),
    (20, 12, 2, 16, 0.0562, 0.3292),
    (18, 12, 2, 18, 0.0562, 0.3290),
    (36, 14, 0, 0, 0.1528, 0.4167),
    (35, 14, 0, 1, 0.1461, 0.4175),
    (18, 14, 0, 18, 0.1441, 0.3963),
    (2, 97, 1, 0, 0.8721, 0.9854),
    (1, 97, 1, 1, 0.8736, 0.9850),
    (0, 29, 1, 0, 0.6666, 0.9882),
    (2, 98, 0, 0, 0.9178, 0.9945),
    (1, 98, 0, 1, 0.9171, 0.9916),
    (0, 30, 0, 0, 0.8395, 1.0),
    (54, 0, 0, 0, -0.0664, 0.0664),
    (53, 0, 0, 1, -0.0729, 0.0729),
    (30, 0, 0, 24, -0.0358, 0.0358),
    (29, 0, 0, 25, -0.0354, 0.0354),
    (28, 0, 0, 26, -0.0352, 0.0352),
    (27, 0, 0, 27, -0.0351, 0.0351),
]


@pytest.mark.parametrize("e, f, g, h, lower, upper", NEWCOMBE_1998_METHOD_10)
def test_paired_proportion_interval_reproduces_newcombe_1998_method_10(e, f, g, h, lower, upper):
    d, lo, hi = intervals.paired_proportion_difference(*_pairs(e, f, g, h))
    assert d == pytest.approx((f - g) / (e + f + g + h), abs=1e-15)
    half_unit = 0.5e-4 + 1e-9
    assert lo == pytest.approx(lower, abs=1e-4 if (e, f, g, h) == (1, 97, 1, 1) else half_unit)
    assert hi == pytest.approx(upper, abs=half_unit)


def test_paired_proportion_interval_matches_other_implementations_of_method_10():
    # Cavo et al. (2012) table, contingencytables (Fagerland, Lydersen & Laake) tests/testthat/test-ch8.R,
    # Newcombe_square_and_add_CI_paired_2x2: -0.0621 (-0.1186 to -0.0046)
    d, lo, hi = intervals.paired_proportion_difference(*_pairs(59, 6, 16, 80))
    assert (d, lo, hi) == pytest.approx((-0.0621, -0.1186, -0.0046), abs=0.5e-4 + 1e-9)
    # Bentur et al. (2009) table of Fagerland et al. (2014), ratesci tests/testthat/test3.R, moverpairci
    # (Wilson, Newcombe's correlation correction): -0.507 to -0.026
    _, lo, hi = intervals.paired_proportion_difference(*_pairs(1, 1, 7, 12))
    assert (lo, hi) == pytest.approx((-0.507, -0.026), abs=0.5e-3 + 1e-9)


@pytest.mark.parametrize(
    "e, f, g, h",
    [(1, 0, 0, 0), (0, 0, 0, 1), (2, 0, 0, 0), (1, 0, 0, 1), (50, 0, 0, 0), (0, 0, 0, 50), (20, 0, 0, 30)],
)
def test_paired_proportion_interval_does_not_collapse_without_discordant_pairs(e, f, g, h):
    """The Wald interval had zero width here (FakeR drift 0 [0, 0] at n = 1)."""
    d, lo, hi = intervals.paired_proportion_difference(*_pairs(e, f, g, h))
    assert d == 0.0 and -1.0 <= lo < 0.0 < hi <= 1.0 and hi == pytest.approx(-lo)


def test_paired_proportion_interval_never_collapses_and_stays_in_range_on_every_small_table():
    # RealR drift -1 at n = 2 (both videos flipped): Wald gave -1 [-1, -1]
    d, lo, hi = intervals.paired_proportion_difference([False, False], [True, True])
    assert d == -1.0 and lo == -1.0 and -1.0 < hi < 0.0
    for n in (1, 2, 3, 5, 12):
        for e in range(n + 1):
            for f in range(n + 1 - e):
                for g in range(n + 1 - e - f):
                    a, b = _pairs(e, f, g, n - e - f - g)
                    d, lo, hi = intervals.paired_proportion_difference(a, b)
                    assert -1.0 <= lo <= d <= hi <= 1.0 and hi - lo > 0.05
                    assert intervals.paired_proportion_difference(b, a) == pytest.approx((-d, -hi, -lo), abs=1e-12)


def test_paired_proportion_interval_rejects_bad_inputs():
    with pytest.raises(MetricError):
        intervals.paired_proportion_difference([], [])
    with pytest.raises(MetricError):
        intervals.paired_proportion_difference([True, False], [True])
    with pytest.raises(MetricError):
        intervals.paired_proportion_difference([True], [True], confidence=1.0)


def _coverage(cells: tuple[float, float, float, float], n: int, reps: int = 1000) -> float:
    rng = np.random.default_rng(24)
    truth = cells[1] - cells[2]
    hits = 0
    for _ in range(reps):
        _, lo, hi = intervals.paired_proportion_difference(*_pairs(*rng.multinomial(n, cells)))
        hits += lo <= truth <= hi
    return hits / reps


@pytest.mark.parametrize("n", [50, 200])
@pytest.mark.parametrize(
    "cells",  # P(both), P(only a), P(only b), P(neither): phi about 0.36, 0.58 and 0.61
    [(0.55, 0.05, 0.25, 0.15), (0.30, 0.10, 0.10, 0.50), (0.45, 0.05, 0.15, 0.35)],
)
def test_paired_proportion_interval_coverage_on_correlated_pairs(n, cells):
    """Exact coverage at n = 50 (enumerating every table): 0.955, 0.959, 0.957."""
    assert 0.92 <= _coverage(cells, n) <= 0.98


def test_paired_proportion_interval_errs_on_the_safe_side_with_few_discordant_pairs():
    """Near the boundary with few discordant pairs method 10 is conservative: exact coverage 0.983 at n = 50
    for these cells (0.96 simulated at n = 200), above the 0.98 of the test above; it must not undercover."""
    cells = (0.88, 0.07, 0.02, 0.03)
    assert _coverage(cells, 50) >= 0.95 and _coverage(cells, 200) >= 0.94


def test_ks_statistic_equals_scipy_with_ties_and_unequal_sizes():
    rng = np.random.default_rng(5)
    for n, m in ((10, 10), (37, 91), (200, 3)):
        a, b = np.round(rng.normal(size=n), 1), np.round(rng.normal(0.3, size=m), 1)
        assert intervals.ks_statistic(a, b) == pytest.approx(ks_2samp(a, b).statistic, abs=1e-12)
    with pytest.raises(MetricError):
        intervals.ks_statistic([], [1.0])


def test_four_auc_covariance_equals_the_placement_value_definition_with_ties():
    rng = np.random.default_rng(7)
    y = rng.random(120) < 0.45
    base = rng.normal(size=120) + y
    s = np.round(np.stack([base + rng.normal(scale=k, size=120) for k in (0.3, 0.6, 0.9, 1.2)]), 1)  # ties
    aucs, cov = intervals.delong_covariance(y, s)
    x, z = s[:, y], s[:, ~y]
    psi = (x[:, :, None] > z[:, None, :]) + 0.5 * (x[:, :, None] == z[:, None, :])
    v10, v01 = psi.mean(2), psi.mean(1)  # placement values of each positive, each negative, per score vector
    m, n = y.sum(), (~y).sum()
    want = (v10 - v10.mean(1, keepdims=True)) @ (v10 - v10.mean(1, keepdims=True)).T / ((m - 1) * m)
    want += (v01 - v01.mean(1, keepdims=True)) @ (v01 - v01.mean(1, keepdims=True)).T / ((n - 1) * n)
    assert cov.shape == (4, 4)
    assert aucs == pytest.approx([roc_auc_score(y, v) for v in s], abs=1e-12)
    assert np.abs(cov - want).max() < 1e-12
    lc = np.array([1, -1, -1, 1])
    value, lo, hi = intervals.robustness_difference(y, (s[3], s[2]), (s[1], s[0]))
    assert value == pytest.approx(lc @ aucs, abs=1e-12)
    assert hi - value == pytest.approx(1.959963984540054 * np.sqrt(lc @ want @ lc), abs=1e-12)
    assert value - lo == pytest.approx(hi - value, abs=1e-12)


def test_two_auc_difference_interval_on_a_worked_example():
    # champion A: X = 0.9, 0.8, 0.4; Y = 0.7, 0.3 -> V10 = (1, 1, 1/2), V01 = (2/3, 1), AUC 5/6
    # challenger B: X = 0.6, 0.2, 0.5; Y = 0.1, 0.5 (a tie) -> V10 = (1, 1/2, 3/4), V01 = (1, 1/2), AUC 3/4
    # S10 = [[1/12, 0], [0, 1/16]], S01 = [[1/18, -1/12], [-1/12, 1/8]]; S = S10/3 + S01/2
    #   = [[1/18, -1/24], [-1/24, 1/12]]; Var(B - A) = 1/18 + 1/12 + 2/24 = 2/9
    y = [1, 1, 1, 0, 0]
    a, b = [0.9, 0.8, 0.4, 0.7, 0.3], [0.6, 0.2, 0.5, 0.1, 0.5]
    aucs, cov = intervals.delong_covariance(y, np.array([a, b]))
    assert aucs == pytest.approx([5 / 6, 3 / 4])
    assert cov == pytest.approx(np.array([[1 / 18, -1 / 24], [-1 / 24, 1 / 12]]), abs=1e-15)
    diff, lo, hi = intervals.auc_difference(y, a, b)
    assert diff == pytest.approx(-1 / 12)
    assert hi == pytest.approx(-1 / 12 + 1.959963984540054 * np.sqrt(2 / 9))
    assert lo == -1.0  # -1.0073 clipped to the range of a difference of two AUCs
    diff, lo, hi = intervals.auc_difference(y, a, b, confidence=0.5)
    assert (lo, hi) == pytest.approx(
        (-1 / 12 - 0.6744897501960817 * np.sqrt(2 / 9), -1 / 12 + 0.6744897501960817 * np.sqrt(2 / 9))
    )
    assert intervals.auc_difference(y, a, b) == pytest.approx(intervals.paired_auc_difference(y, b, a))
    with pytest.raises(MetricError):
        intervals.auc_contrast(y, np.array([a, b]), (1, -1, 0))


def test_auc_difference_and_robustness_difference_intervals_cover_the_true_values():
    """Four correlated binormal score vectors (champion and challenger, original and condition) on the same
    200 + 200 videos, 300 windows: both intervals cover the known true contrast within 0.92-0.98."""
    from scipy.stats import norm

    rng = np.random.default_rng(3)
    shifts = np.array([1.4, 0.7, 1.2, 0.9])  # challenger original, condition; champion original, condition
    corr = np.array([[1, 0.6, 0.5, 0.3], [0.6, 1, 0.3, 0.5], [0.5, 0.3, 1, 0.6], [0.3, 0.5, 0.6, 1]])
    true = norm.cdf(shifts / np.sqrt(2))
    true_diff = true[1] - true[3]  # under the condition: challenger minus champion
    true_rob = (true[1] - true[0]) - (true[3] - true[2])
    y = np.arange(400) < 200
    hit_diff = hit_rob = 0
    reps = 300
    for _ in range(reps):
        s = rng.multivariate_normal(np.zeros(4), corr, size=400).T + shifts[:, None] * y
        _, lo, hi = intervals.auc_difference(y, s[3], s[1])
        hit_diff += lo <= true_diff <= hi
        _, lo, hi = intervals.robustness_difference(y, (s[2], s[3]), (s[0], s[1]))
        hit_rob += lo <= true_rob <= hi
    assert 0.92 <= hit_diff / reps <= 0.98
    assert 0.92 <= hit_rob / reps <= 0.98
