"""Rank statistics from one sort (detectors/ranks.py): the sort itself, subsets, DeLong's components, the KS merge."""

import numpy as np
import pytest
from scipy.stats import ks_2samp
from sklearn.metrics import roc_auc_score

from detectors.stats import MetricError, intervals
from detectors.stats.ranks import MIN_PACKED, Ranked, ascending_order, structural_components

RNG = np.random.default_rng(20261201)


def _hard_cases() -> list[np.ndarray]:
    """Values whose packed keys collide (equal high bits, different low ones), ties, signed zeros, infinities,
    subnormals, float32-made scores (many low bits zero) and discrete scores."""
    near_one = 1.0 + np.arange(3000) * 2.2e-16  # all within 2**-40 of each other: one run of equal high bits
    return [
        RNG.normal(size=200_000),
        np.r_[RNG.normal(size=5000), near_one[::-1], -near_one],
        np.r_[RNG.permutation(np.r_[[0.0, -0.0] * 3000, [np.inf, -np.inf, 5e-324, -5e-324]]), RNG.normal(size=4000)],
        RNG.normal(size=50_000).astype(np.float32).astype(np.float64),
        RNG.integers(0, 4, 60_000).astype(np.float64),
        RNG.normal(size=MIN_PACKED - 1),  # np.argsort's path
    ]


@pytest.mark.parametrize("case", range(len(_hard_cases())))
def test_ascending_order_sorts_like_numpy(case):
    v = _hard_cases()[case]
    order, ascending = ascending_order(v)
    assert np.array_equal(ascending, np.sort(v)) and np.array_equal(v[order], ascending)
    assert np.array_equal(np.sort(order), np.arange(v.size))  # a permutation


def _brute_components(y: np.ndarray, s: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    pos, neg = s[y], s[~y]
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    return float(psi.mean()), psi.mean(axis=1), psi.mean(axis=0)


@pytest.mark.parametrize("trial", range(40))
def test_components_of_any_subset_equal_the_definition(trial):
    rng = np.random.default_rng(trial)
    n = int(rng.integers(6, 400))
    s = rng.integers(0, 6, n).astype(float) if trial % 2 else rng.normal(size=n)  # with and without ties
    y = rng.random(n) < 0.4
    ranked = Ranked.of(s)
    positions = rng.permutation(n)[: int(rng.integers(4, n + 1))] if trial % 3 else np.arange(n)
    sub_y, sub_s = y[positions], s[positions]
    if sub_y.all() or not sub_y.any():
        with pytest.raises(MetricError, match="both classes"):
            structural_components(sub_y, ranked.take(positions))
        return
    got = structural_components(sub_y, ranked.take(positions))
    auc, v10, v01 = _brute_components(sub_y, sub_s)
    assert got.auc == pytest.approx(auc, abs=1e-15) and got.auc == pytest.approx(roc_auc_score(sub_y, sub_s), abs=1e-15)
    assert np.allclose(got.v10, v10, atol=1e-15, rtol=0) and np.allclose(got.v01, v01, atol=1e-15, rtol=0)


def test_a_subset_is_ranked_as_if_sorted_afresh():
    s = RNG.normal(size=20_000).round(2)  # ties
    ranked = Ranked.of(s)
    for positions in (RNG.permutation(20_000)[:15_000], RNG.permutation(20_000)[:300], np.arange(20_000)):
        sub = ranked.take(positions)
        assert np.array_equal(sub.values, s[positions]) and np.array_equal(sub.ascending(), np.sort(s[positions]))
        assert np.array_equal(sub.values[sub.order], sub.ascending())


@pytest.mark.parametrize("trial", range(30))
def test_the_ks_merge_equals_scipy(trial):
    rng = np.random.default_rng(100 + trial)
    a = (
        rng.integers(0, 8, int(rng.integers(1, 300))).astype(float)
        if trial % 2
        else rng.normal(size=int(rng.integers(1, 300)))
    )
    b = (
        rng.integers(0, 8, int(rng.integers(1, 300))).astype(float)
        if trial % 3
        else rng.normal(0.3, size=int(rng.integers(1, 300)))
    )
    want = ks_2samp(a, b).statistic
    for chunk in (1, 2, 5, 16, intervals.KS_CHUNK):  # slices of the merge cut between (never within) runs of ties
        assert intervals.ks_of_ascending(np.sort(a), np.sort(b), chunk) == pytest.approx(want, abs=1e-15)


def test_paired_proportions_from_counts_equal_those_from_pairs_and_refuse_bad_counts():
    a, b = RNG.random(500) < 0.6, RNG.random(500) < 0.5
    e, f, g, h = int((a & b).sum()), int((a & ~b).sum()), int((~a & b).sum()), int((~a & ~b).sum())
    assert intervals.paired_proportion_difference_of(e, f, g, h) == intervals.paired_proportion_difference(a, b)
    for bad in ((0, 0, 0, 0), (1, -1, 0, 0)):
        with pytest.raises(MetricError, match="pair counts"):
            intervals.paired_proportion_difference_of(*bad)
