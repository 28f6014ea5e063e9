"""The anchor-clustered bootstrap of the paired evaluation (RA-Bench §B.2) on a run's rows: resample real anchors,
each bringing all its generated counterparts, stratified by the sources linked to them
(:mod:`detectors.stats.bootstrap` draws)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from detectors.stats.bootstrap import strata_of, stratified_counts
from gateway.core.messages import ScoreRow
from gateway.evaluation.errors import EvaluationError

# fewer, and a 95 % interval's ends rest on one replicate each (or none)
MIN_REPLICATES = 50


def check_replicates(replicates: int) -> None:
    """Raise :class:`EvaluationError` for fewer than :data:`MIN_REPLICATES` bootstrap replicates."""
    if replicates < MIN_REPLICATES:
        raise EvaluationError(f"the bootstrap needs at least {MIN_REPLICATES} replicates, got {replicates}")


def anchor_resamples(rows: list[ScoreRow], anchors: list[str], replicates: int, seed: int) -> np.ndarray:
    """``[B, n_anchors]`` bootstrap counts: anchors resampled with replacement, each bringing its real video and
    all its generated counterparts. Stratified by source: anchors are resampled within groups that share the
    same set of linked sources, so every source keeps its number of anchors in every replicate; an anchor alone in
    its group joins the nearest group (:func:`detectors.stats.bootstrap.strata_of`: alone, it would never vary).
    One draw serves every detector and condition, so drift intervals are paired. Raises :class:`EvaluationError`
    for fewer than :data:`MIN_REPLICATES` replicates.
    """
    check_replicates(replicates)
    linked: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        if r.label == "generated" and r.anchor_id and r.source:
            linked[r.anchor_id].add(r.source)
    strata = strata_of([frozenset(linked[a]) for a in anchors])
    return stratified_counts(strata, len(anchors), replicates, seed)
