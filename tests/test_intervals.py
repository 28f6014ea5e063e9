"""Wilson and DeLong intervals, the paired-proportion interval and the KS distance, against worked examples,
brute-force definitions, scipy, and coverage simulations."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom, ks_2samp
from sklearn.metrics import roc_auc_score

from detectors import intervals
from detectors.metrics import MetricError


def test_wilson_matches_published_values_and_stays_in_range():
    # Wilson (1927) / Newcombe (1998), table I: 0/10 -> (0, 0.2775); 7/10 -> (0.3968, 0.8922)
    assert intervals.wilson_interval(0, 10)[1:] == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert intervals.wilson_interval(7, 10)[1:] == pytest.approx((0.3968, 0.8922), abs=1e-4)
    assert intervals.wilson_interval(10, 10)[2] == pytest.approx(1.0)
    with pytest.raises(MetricError):
        intervals.wilson_interval(3, 0)


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


def test_ks_statistic_equals_scipy_with_ties_and_unequal_sizes():
    rng = np.random.default_rng(5)
    for n, m in ((10, 10), (37, 91), (200, 3)):
        a, b = np.round(rng.normal(size=n), 1), np.round(rng.normal(0.3, size=m), 1)
        assert intervals.ks_statistic(a, b) == pytest.approx(ks_2samp(a, b).statistic, abs=1e-12)
    with pytest.raises(MetricError):
        intervals.ks_statistic([], [1.0])
