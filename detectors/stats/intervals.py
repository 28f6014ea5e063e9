"""Confidence intervals for the live metrics, and a two-sample distance: pure functions, validated inputs.

Same conventions as :mod:`detectors.stats.metrics` (``y_true`` 1 = generated, scores higher = more generated).
Every interval is two-sided at ``confidence`` (default 95%) and returned as ``(estimate, lower, upper)``;
a quantity undefined on the inputs (an empty class) raises :class:`~detectors.stats.MetricError` here,
because the monitor asks only where it is defined.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from detectors.stats.errors import MetricError
from detectors.stats.inputs import labels, z_quantile
from detectors.stats.ranks import Components, Ranked, structural_components
from detectors.stats.ties import run_ends

Interval = tuple[float, float, float]


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> Interval:
    """A proportion with its Wilson score interval (Wilson 1927; recommended by Brown, Cai & DasGupta 2001).

    With p = k/n and z the normal quantile: centre = (p + z²/2n) / (1 + z²/n), half-width =
    z / (1 + z²/n) · sqrt(p(1-p)/n + z²/4n²). Unlike the Wald interval it stays inside [0, 1] and keeps its
    coverage near 0 and 1 (a FakeR that collapses to 0 still gets an upper bound above 0).
    """
    if n <= 0 or not 0 <= successes <= n:
        raise MetricError(f"need 0 <= successes <= n and n > 0, got {successes}/{n}")
    z = z_quantile(confidence)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return p, float(max(0.0, min(p, centre - half))), float(min(1.0, max(p, centre + half)))  # p inside: rounding


def delong_covariance(y_true: Sequence | np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """AUCs of k score vectors on the same videos and DeLong's covariance matrix of those AUCs.

    DeLong, DeLong & Clarke-Pearson (1988): for m positives X and n negatives Y, the structural components are
    V10(X_i) = (1/n) Σ_j ψ(X_i, Y_j) and V01(Y_j) = (1/m) Σ_i ψ(X_i, Y_j), with ψ = 1 if X > Y, 1/2 on a tie,
    else 0 (:func:`detectors.stats.ranks.structural_components`, one sort per vector); then S = S10/m + S01/n, where
    S10 and S01 are the sample covariance matrices of the components over the k vectors. ``scores`` has shape
    (k, N) or (N,).
    """
    return delong_of(_components(y_true, scores))


def _components(y_true: Sequence | np.ndarray, scores: np.ndarray) -> list[Components]:
    """Each row's structural components, after validating the labels and a (k, N) or (N,) score array."""
    s = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    y = labels(y_true)
    if s.shape[1] != y.shape[0] or np.isnan(s).any():
        raise MetricError(f"scores shape {s.shape} does not match y_true {y.shape}, or holds NaN")
    return [structural_components(y, Ranked.of(row)) for row in s]


def delong_of(components: Sequence[Components]) -> tuple[np.ndarray, np.ndarray]:
    """The AUCs and DeLong's covariance matrix S = S10/m + S01/n of k vectors' structural components (the same
    videos, so the same m positives and n negatives each)."""
    m, n = components[0].v10.size, components[0].v01.size
    if m < 2 or n < 2:
        raise MetricError(f"DeLong's variance needs at least 2 of each class, got {m} generated and {n} real")
    v10 = np.stack([c.v10 for c in components])
    v01 = np.stack([c.v01 for c in components])
    cov = np.atleast_2d(np.cov(v10)) / m + np.atleast_2d(np.cov(v01)) / n
    return np.array([c.auc for c in components]), cov


def contrast_interval(
    components: Sequence[Components], contrast: Sequence[float], confidence: float = 0.95
) -> Interval:
    """A contrast L·AUC of k correlated AUCs (their structural components, the same videos) with DeLong's
    interval (DeLong et al. 1988, §3): L·θ̂ ± z·sqrt(L S Lᵀ), S from :func:`delong_of`, clipped to the
    contrast's range (its negative weights' sum to its positive weights': AUCs lie in [0, 1]). L = (1,) is
    one AUC's interval, (1, -1) a paired difference."""
    weights = np.asarray(contrast, dtype=np.float64)
    if weights.shape != (len(components),):
        raise MetricError(f"a contrast needs one weight per score vector, got {weights.shape} for {len(components)}")
    aucs, cov = delong_of(components)
    value = float(weights @ aucs)
    half = z_quantile(confidence) * np.sqrt(max(float(weights @ cov @ weights), 0.0))
    low, high = float(np.clip(weights, None, 0).sum()), float(np.clip(weights, 0, None).sum())
    return value, float(max(low, value - half)), float(min(high, value + half))


def auc_interval(y_true: Sequence | np.ndarray, scores: Sequence | np.ndarray, confidence: float = 0.95) -> Interval:
    """AUC with DeLong's asymptotic normal interval, AUC ± z·sqrt(Var), clipped to [0, 1]."""
    return auc_contrast(y_true, np.asarray(scores, dtype=np.float64)[None, :], (1,), confidence)


def paired_auc_difference(
    y_true: Sequence | np.ndarray,
    scores_a: Sequence | np.ndarray,
    scores_b: Sequence | np.ndarray,
    confidence: float = 0.95,
) -> Interval:
    """AUC(a) - AUC(b) on the same videos with DeLong's interval for two correlated ROC curves.

    Var(AUC_a - AUC_b) = S_aa + S_bb - 2 S_ab from :func:`delong_covariance` (DeLong et al. 1988, eq. for the
    contrast L = (1, -1)). ``a`` is the condition's scores, ``b`` original's: a drift interval wholly below 0
    is a significant loss of AUC.
    """
    stacked = np.stack([np.asarray(scores_a, dtype=np.float64), np.asarray(scores_b, dtype=np.float64)])
    return auc_contrast(y_true, stacked, (1, -1), confidence)


def paired_proportion_difference(
    a: Sequence | np.ndarray, b: Sequence | np.ndarray, confidence: float = 0.95
) -> Interval:
    """mean(a) - mean(b) for paired booleans (e.g. FakeR under a condition minus under original, same videos).

    Newcombe's (1998) hybrid score interval for the difference of paired proportions, his method 10
    (Newcombe RG, "Improved confidence intervals for the difference between binomial proportions based on
    paired data", Statistics in Medicine 17:2635-2650). With n pairs counted as e (both hold), f (only ``a``),
    g (only ``b``) and h (neither): p1 = (e+f)/n, p2 = (e+g)/n, d = p1 - p2 = (f - g)/n. Take the Wilson
    intervals (l1, u1) of p1 and (l2, u2) of p2 (:func:`wilson_interval`) and
    lower = d - sqrt((p1-l1)² - 2φ(p1-l1)(u2-p2) + (u2-p2)²),
    upper = d + sqrt((p2-l2)² - 2φ(p2-l2)(u1-p1) + (u1-p1)²),
    where φ is the phi coefficient of the 2x2 table with Newcombe's correction: with A = eh - fg and
    P = (e+f)(g+h)(e+g)(f+h), φ = (A - n/2)/sqrt(P) if A > n/2, 0 if 0 <= A <= n/2, A/sqrt(P) if A < 0, and
    φ = 0 when P = 0 (a margin is empty). Unlike the Wald interval, Var = (f + g - (f - g)²/n)/n², it does
    not collapse to zero width without discordant pairs (e.g. n = 1 gives 0 [-0.79, 0.79], not 0 [0, 0]),
    and it stays inside [-1, 1] (clipped there against rounding).
    """
    x, y = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    if x.shape != y.shape or x.ndim != 1 or x.size == 0:
        raise MetricError(f"need two non-empty 1-D arrays of the same shape, got {x.shape} and {y.shape}")
    h, g, f, e = np.bincount(2 * x.astype(np.int8) + y, minlength=4).tolist()  # (a, b): 00, 01, 10, 11
    return paired_proportion_difference_of(e, f, g, h, confidence)


def paired_proportion_difference_of(e: int, f: int, g: int, h: int, confidence: float = 0.95) -> Interval:
    """:func:`paired_proportion_difference` from the counts of the pairs: e both, f only ``a``, g only ``b``,
    h neither."""
    if min(e, f, g, h) < 0 or e + f + g + h == 0:
        raise MetricError(f"need non-negative pair counts, not all zero, got {(e, f, g, h)}")
    n = e + f + g + h
    p1, l1, u1 = wilson_interval(e + f, n, confidence)
    p2, l2, u2 = wilson_interval(e + g, n, confidence)
    # Python ints: the product of the four margins would overflow int64 from n of about 2**18
    margins = (e + f) * (g + h) * (e + g) * (f + h)
    cross = e * h - f * g
    if margins == 0 or 0 <= cross <= n / 2:
        phi = 0.0
    else:
        phi = (cross - n / 2 if cross > n / 2 else cross) / np.sqrt(float(margins))
    d = (f - g) / n  # = p1 - p2, without its rounding
    lower = d - np.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    upper = d + np.sqrt(max((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2, 0.0))
    return d, float(max(-1.0, lower)), float(min(1.0, upper))


def ks_statistic(a: Sequence | np.ndarray, b: Sequence | np.ndarray) -> float:
    """The two-sample Kolmogorov-Smirnov distance sup_x |F_a(x) - F_b(x)| between empirical CDFs (Smirnov
    1939); equals ``scipy.stats.ks_2samp(a, b).statistic``. 0: same distribution of scores, 1: disjoint."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.size == 0 or y.size == 0 or np.isnan(x).any() or np.isnan(y).any():
        raise MetricError("the KS distance needs two non-empty samples without NaN")
    return ks_of_ascending(np.sort(x), np.sort(y))


KS_CHUNK = 1 << 16  # values of each sample merged at a time by :func:`ks_of_ascending`


def ks_of_ascending(x: np.ndarray, y: np.ndarray, chunk: int = KS_CHUNK) -> float:
    """:func:`ks_statistic` of two samples given ascending (e.g. :meth:`detectors.stats.ranks.Ranked.ascending`).
    Along the merge of the two, c_x and c_y count the values of each sample so far; at the last value of each run
    of equal values (where both empirical CDFs have taken their step) F_x - F_y = (c_x·n_y - c_y·n_x) / (n_x·n_y).
    So, in whole numbers: D = max over those points of |c_x·n_y - c_y·n_x| / (n_x·n_y).
    The merge goes a slice of the values at a time, cut before every ``chunk``-th value of either sample (all
    the values equal to a cut go to the slice after it, so no run of ties is cut): a slice is merged by a stable
    sort (timsort merges its two runs in linear time) within the cache, and the memory held is a few slices', not
    five arrays of both samples (50 MB at a million values each), unless a run of ties is longer than a slice
    (a saturated detector's scores): that run is merged whole. About 17 ms at a million values each on this
    project's 2-core machine, against 25 ms for one merge of the whole and 42 ms for binary searches of each
    sample's values in the other's."""
    nx, ny = x.size, y.size
    if nx == 0 or ny == 0 or chunk < 1:
        raise MetricError(f"the KS distance needs two non-empty samples and a slice of at least 1, got {nx}, {ny}")
    cuts = np.unique(np.concatenate([x[chunk::chunk], y[chunk::chunk]]))
    ix = np.concatenate([[0], np.searchsorted(x, cuts, "left"), [nx]])
    iy = np.concatenate([[0], np.searchsorted(y, cuts, "left"), [ny]])
    top = bottom = 0
    for x0, x1, y0, y1 in zip(ix[:-1].tolist(), ix[1:].tolist(), iy[:-1].tolist(), iy[1:].tolist(), strict=True):
        if x1 > x0 or y1 > y0:
            gap = _ks_gaps(x[x0:x1], y[y0:y1], x0, y0, nx, ny)
            top, bottom = max(top, int(gap.max())), min(bottom, int(gap.min()))
    return max(top, -bottom) / (nx * ny)


def _ks_gaps(x: np.ndarray, y: np.ndarray, x0: int, y0: int, nx: int, ny: int) -> np.ndarray:
    """c_x·n_y - c_y·n_x at the end of each run of equal values of a slice of the merge, whose values come after
    ``x0`` of x and ``y0`` of y."""
    merged = np.concatenate([x, y])
    order = np.argsort(merged, kind="stable")
    ends = run_ends(merged[order])
    c_y = np.cumsum(order >= x.size, dtype=np.int64)
    if ends.size == c_y.size:  # no ties: every position ends a run
        c_x = np.arange(1, c_y.size + 1, dtype=np.int64)
    else:
        c_y, c_x = c_y[ends - 1], ends.astype(np.int64)
    c_x -= c_y
    c_x += x0
    c_y += y0
    return c_x * ny - c_y * nx


def auc_contrast(
    y_true: Sequence | np.ndarray, scores: np.ndarray, contrast: Sequence[float], confidence: float = 0.95
) -> Interval:
    """A contrast L·AUC of k correlated AUCs on the same videos with DeLong's interval (DeLong et al. 1988, §3):
    L·θ̂ is asymptotically normal with variance L S Lᵀ, S from :func:`delong_covariance`. ``scores`` has shape
    (k, N); the interval is clipped to the contrast's range (its negative weights' sum to its positive weights')."""
    return contrast_interval(_components(y_true, scores), contrast, confidence)


def auc_difference(
    y_true: Sequence | np.ndarray,
    champion: Sequence | np.ndarray,
    challenger: Sequence | np.ndarray,
    confidence: float = 0.95,
) -> Interval:
    """AUC(challenger) - AUC(champion) on the same videos with DeLong's interval for two correlated AUCs
    (contrast L = (1, -1)); equals :func:`paired_auc_difference` with the challenger first."""
    return paired_auc_difference(y_true, challenger, champion, confidence)


def robustness_difference(
    y_true: Sequence | np.ndarray,
    champion: tuple[Sequence | np.ndarray, Sequence | np.ndarray],
    challenger: tuple[Sequence | np.ndarray, Sequence | np.ndarray],
    confidence: float = 0.95,
) -> Interval:
    """(AUC_challenger(condition) - AUC_challenger(original)) - (AUC_champion(condition) - AUC_champion(original)),
    all four on the same videos, with DeLong's interval for the contrast L = (1, -1, -1, 1) of the four correlated
    AUCs. ``champion`` and ``challenger`` are (original scores, condition scores). Below 0: the challenger loses
    more AUC under the condition than the champion does; an upper bound below 0 says so significantly."""
    (h_orig, h_cond), (c_orig, c_cond) = champion, challenger
    stacked = np.stack([np.asarray(v, dtype=np.float64) for v in (c_cond, c_orig, h_cond, h_orig)])
    return auc_contrast(y_true, stacked, (1, -1, -1, 1), confidence)
