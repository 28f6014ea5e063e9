"""The anchor-clustered bootstrap of the paired evaluation (RA-Bench §B.2): resample real anchors, each bringing
all its generated counterparts, stratified by source; 95 % percentile intervals."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from gateway.core.messages import ScoreRow
from gateway.evaluation.errors import EvaluationError

MIN_REPLICATES = 50  # fewer, and a 95 % interval's ends rest on one replicate each (or none)


def check_replicates(replicates: int) -> None:
    """Raise :class:`EvaluationError` for fewer than :data:`MIN_REPLICATES` bootstrap replicates."""
    if replicates < MIN_REPLICATES:
        raise EvaluationError(f"the bootstrap needs at least {MIN_REPLICATES} replicates, got {replicates}")


def anchor_resamples(rows: list[ScoreRow], anchors: list[str], replicates: int, seed: int) -> np.ndarray:
    """``[B, n_anchors]`` bootstrap counts: anchors resampled with replacement, each bringing its real video and
    all its generated counterparts. Stratified by source: anchors are resampled within groups that share the
    same set of linked sources, so every source keeps its number of anchors in every replicate. One draw
    serves every detector and condition, so drift intervals are paired. Raises :class:`EvaluationError` for
    fewer than :data:`MIN_REPLICATES` replicates.
    """
    check_replicates(replicates)
    linked: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        if r.label == "generated" and r.anchor_id and r.source:
            linked[r.anchor_id].add(r.source)
    groups: dict[frozenset, list[int]] = defaultdict(list)
    for i, a in enumerate(anchors):
        groups[frozenset(linked[a])].append(i)
    rng = np.random.default_rng(seed)
    counts = np.zeros((replicates, len(anchors)))
    for members in groups.values():
        idx = np.asarray(members)
        picks = idx[rng.integers(0, len(idx), (replicates, len(idx)))]
        for b in range(replicates):
            counts[b] += np.bincount(picks[b], minlength=len(anchors))
    return counts


def percentile_interval(samples: np.ndarray) -> tuple[float, float]:
    """The 2.5 and 97.5 percentiles of the replicates that are defined (nan where none is)."""
    s = samples[~np.isnan(samples)]
    if len(s) == 0:
        return (float("nan"), float("nan"))
    lo, hi = np.percentile(s, [2.5, 97.5])
    return (float(lo), float(hi))
