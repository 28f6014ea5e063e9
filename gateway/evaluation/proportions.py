"""Differences of paired proportions offline, with the score intervals PROTOCOL.md names: FakeR and RealR of one
detector under a condition against ``original`` (the report's drift), of a challenger against its champion, and of
their flip rates with Newcombe's (1998) paired score interval, method 10
(:func:`detectors.intervals.paired_proportion_difference`); a share (the disagreement) with Wilson's. Unlike the
percentile bootstrap, which gives [0, 0] when no pair is discordant (and [-100, -100] when every pair is), these
never collapse.

The pairs are videos: each video decided on both sides counts once (a real anchor linked to several sources is one
pair), so a difference pools the videos, where the report's FakeR and RealR average the sources with equal weight.
The two agree wherever every source has the same number of videos and each real anchor is linked to every source,
as in the self-made corpus; :func:`pooling_differs` lists the cells where they do not. A video-error row is a
decision that misses its class (as in the denominators of FakeR and RealR); an infrastructure error is no decision.
The pairs are counted as independent: unlike the AUCs' anchor-clustered bootstrap, these intervals do not cluster
an anchor's counterparts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from detectors import intervals
from gateway.core.messages import ScoreRow

Estimate = tuple[float, tuple[float, float]]  # point estimate, 95% interval
NO_PAIRS: Estimate = (math.nan, (math.nan, math.nan))
POOLING_TOLERANCE = 1e-9  # pooled and source-averaged differences further apart than this are named


@dataclass(frozen=True)
class Decision:
    """One video's decision by one detector under one condition."""

    label: str  # real | generated
    flagged: bool | None  # decided generated at the threshold; None: the video failed (a video error)

    @property
    def correct(self) -> bool:
        """Decided as its label says; a failed video is a miss of its class."""
        return self.flagged is not None and self.flagged == (self.label == "generated")


Decisions = dict[tuple[str, str], dict[str, Decision]]  # (detector, condition) -> video -> decision


def decisions(rows: Iterable[ScoreRow], thresholds: dict[str, float]) -> Decisions:
    """Every video's decision per (detector, condition) at its detector's threshold: the generated videos paired
    with a real anchor, and the real videos of anchors that have a generated counterpart (the videos FakeR and
    RealR count); rows with an infrastructure error are left out."""
    rows = [r for r in rows if r.error_kind != "infra" and r.anchor_id]
    linked = {r.anchor_id for r in rows if r.label == "generated" and r.source}
    out: Decisions = {}
    for r in rows:
        if (r.label == "generated" and r.source) or (r.label == "real" and r.anchor_id in linked):
            flagged = None if r.score is None else bool(r.score >= thresholds[r.detector])
            out.setdefault((r.detector, r.condition), {})[r.video_id] = Decision(r.label, flagged)
    return out


def recall_differences(
    a: dict[str, Decision], b: dict[str, Decision], confidence: float = 0.95
) -> tuple[Estimate, Estimate]:
    """(FakeR(a) - FakeR(b), RealR(a) - RealR(b)) on the videos both ``a`` and ``b`` decided, each with
    Newcombe's paired interval; :data:`NO_PAIRS` for a class without a shared video."""
    shared = sorted(a.keys() & b.keys())
    out = []
    for label in ("generated", "real"):
        videos = [v for v in shared if a[v].label == label]
        out.append(paired_difference([a[v].correct for v in videos], [b[v].correct for v in videos], confidence))
    return out[0], out[1]


def paired_difference(x: list[bool], y: list[bool], confidence: float = 0.95) -> Estimate:
    """mean(x) - mean(y) over pairs, with Newcombe's method 10 interval; :data:`NO_PAIRS` without a pair."""
    if not x:
        return NO_PAIRS
    d, lo, hi = intervals.paired_proportion_difference(np.array(x, bool), np.array(y, bool), confidence)
    return d, (lo, hi)


def share(successes: int, n: int, confidence: float = 0.95) -> Estimate:
    """successes / n with Wilson's interval; :data:`NO_PAIRS` for n = 0."""
    if n == 0:
        return NO_PAIRS
    p, lo, hi = intervals.wilson_interval(successes, n, confidence)
    return p, (lo, hi)


def pooling_differs(pooled: float | None, averaged: float) -> bool:
    """Whether a pooled difference and the difference of source averages are both defined and apart."""
    return (
        pooled is not None
        and math.isfinite(pooled)
        and math.isfinite(averaged)
        and (abs(pooled - averaged) > POOLING_TOLERANCE)
    )
