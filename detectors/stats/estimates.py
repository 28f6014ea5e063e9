"""Point estimates with their intervals, as the reports give them: a share with Wilson's interval, a difference of
paired proportions with Newcombe's, a clustered share with the hull of its bootstrap's and Wilson's.

Why the hull (:func:`widened`): the percentile bootstrap collapses to [0, 0] when no video changed its decision;
Newcombe's interval counts each video as an independent pair, and an anchor's counterparts are not. The hull of the
two is never narrower than either, keeps the clustering and never collapses (gateway.evaluation.proportions and
tests/test_metrics.py measure its coverage)."""

from __future__ import annotations

import math

import numpy as np

from detectors.stats import intervals
from detectors.stats.bootstrap import percentile_interval

Estimate = tuple[float, tuple[float, float]]  # point estimate, 95% interval
NO_PAIRS: Estimate = (math.nan, (math.nan, math.nan))


def paired_difference(x: list[bool], y: list[bool], confidence: float = 0.95) -> Estimate:
    """mean(x) - mean(y) over pairs, with Newcombe's method 10 interval
    (:func:`~detectors.stats.intervals.paired_proportion_difference`); :data:`NO_PAIRS` without a pair."""
    if not x:
        return NO_PAIRS
    d, lo, hi = intervals.paired_proportion_difference(np.array(x, bool), np.array(y, bool), confidence)
    return d, (lo, hi)


def share(successes: int, n: int, confidence: float = 0.95) -> Estimate:
    """successes / n with Wilson's interval (:func:`~detectors.stats.intervals.wilson_interval`); :data:`NO_PAIRS`
    for n = 0."""
    if n == 0:
        return NO_PAIRS
    p, lo, hi = intervals.wilson_interval(successes, n, confidence)
    return p, (lo, hi)


def clustered_share(hits: np.ndarray, n: np.ndarray, weights: np.ndarray) -> tuple[Estimate, np.ndarray]:
    """Σ hits / Σ n from per-cluster counts, its interval the hull of the clustered bootstrap's (replicate b:
    Σ_k w_bk·hits_k / Σ_k w_bk·n_k over ``weights``, ``[B, clusters]``) and Wilson's; and the replicates (nan where
    a replicate has no video). :data:`NO_PAIRS` as the estimate where ``n`` has none."""
    with np.errstate(invalid="ignore", divide="ignore"):
        replicates = (weights @ hits) / (weights @ n)
    total = int(n.sum())
    if not total:
        return NO_PAIRS, replicates
    point = float(hits.sum() / n.sum())
    return widened((point, percentile_interval(replicates)), share(int(hits.sum()), total)), replicates


def widened(estimate: Estimate, score: Estimate) -> Estimate:
    """``estimate``'s point with the hull of its interval and ``score``'s (an undefined end takes the other's)."""
    point, (lo, hi) = estimate
    _, (s_lo, s_hi) = score
    return point, (float(np.fmin(lo, s_lo)), float(np.fmax(hi, s_hi)))
