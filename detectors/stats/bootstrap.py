"""The clustered, stratified bootstrap of the paired evaluation (RA-Bench §B.2; Efron & Tibshirani 1993, ch. 13):
clusters (a real anchor with all its generated counterparts) resampled with replacement within their stratum, and
95 % percentile intervals of the replicates."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from detectors.stats.errors import MetricError


def strata_of(keys: Sequence[frozenset]) -> list[list[int]]:
    """The clusters' strata: the positions of the clusters that share a key, in the order each key first appears.

    A stratum of one cluster would bring that cluster exactly once to every replicate: it would never vary, and
    the interval would understate the spread. So each such stratum joins the stratum whose key shares the most with
    its own (Jaccard similarity |a ∩ b| / |a ∪ b|; then the larger stratum; then the first), one at a time in the
    order they appear, unless there is no other stratum."""
    groups: dict[frozenset, list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        groups[frozenset(key)].append(i)
    first = {k: i for i, k in enumerate(groups)}  # where each key first appears: the last tie-break
    for key in [k for k, members in groups.items() if len(members) == 1]:
        if len(groups) < 2 or len(groups[key]) != 1:
            continue
        members = groups.pop(key)
        nearest = max(groups, key=lambda k: (_jaccard(key, k), len(groups[k]), -first[k]))
        groups[nearest] = sorted(groups[nearest] + members)
    return list(groups.values())


def _jaccard(a: frozenset, b: frozenset) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 1.0


def stratified_counts(strata: Sequence[Sequence[int]], n: int, replicates: int, seed: int) -> np.ndarray:
    """``[replicates, n]`` bootstrap counts of ``n`` clusters: each replicate draws, within every stratum, as many
    clusters as it holds, with replacement (so every stratum keeps its size in every replicate). One draw serves
    every statistic computed on it, so intervals of differences between them are paired."""
    if replicates < 1:
        raise MetricError(f"need at least one replicate, got {replicates}")
    rng = np.random.default_rng(seed)
    counts = np.zeros((replicates, n))
    for members in strata:
        idx = np.asarray(members)
        picks = idx[rng.integers(0, len(idx), (replicates, len(idx)))]
        for b in range(replicates):
            counts[b] += np.bincount(picks[b], minlength=n)
    return counts


def percentile_interval(samples: np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """The (1 - confidence)/2 and (1 + confidence)/2 percentiles of the replicates that are defined (the
    percentile interval, Efron & Tibshirani 1993, §13.3); nan where none is."""
    if not 0 < confidence < 1:
        raise MetricError(f"confidence must lie in (0, 1), got {confidence}")
    s = samples[~np.isnan(samples)]
    if len(s) == 0:
        return (float("nan"), float("nan"))
    tail = 50 * (1 - confidence)
    lo, hi = np.percentile(s, [tail, 100 - tail])
    return (float(lo), float(hi))
