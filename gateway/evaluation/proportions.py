"""Differences of paired proportions offline: FakeR and RealR of one detector under a condition against
``original`` (the report's drift), of a challenger against its champion, their flip rates, and the share of videos
two detectors decide differently.

PROTOCOL.md asks two things of their intervals: the anchor-clustered bootstrap of the offline report, and, for a
difference of paired proportions, a score interval that never collapses (Newcombe 1998, method 10; Wilson's for a
share). Neither alone is enough here. The percentile bootstrap collapses to [0, 0] when no video changed its
decision (and to [-100, -100] when a challenger missed every real video). Newcombe's interval counts each video as
an independent pair, and an anchor's counterparts are not: when a condition moves some anchors' videos more than
others', it covered a simulated truth 83 % of the time where the hull below covers it 96 %
(tests/test_metrics.py). So each interval here is the hull of the two
(:func:`detectors.stats.estimates.widened`): never narrower than either, it keeps the clustering and never
collapses. The point estimate is the protocol's (sources weighted equally, as the cells are); the score interval
pools the videos decided on both sides, each counted once. A video-error row is a decision that misses its class
(as in the denominators of FakeR and RealR); an infrastructure error is no decision.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from detectors.stats.estimates import Estimate, paired_difference
from gateway.core.messages import ScoreRow
from gateway.evaluation.thresholds import decided


@dataclass(frozen=True)
class Decision:
    """One video's decision by one detector under one condition."""

    # real | generated
    label: str
    anchor: str
    # decided generated at the threshold; None: the video failed (a video error)
    flagged: bool | None

    @property
    def correct(self) -> bool:
        """Decided as its label says; a failed video is a miss of its class."""
        return self.flagged is not None and self.flagged == (self.label == "generated")


# (detector, condition) -> video -> decision
Decisions = dict[tuple[str, str], dict[str, Decision]]


def decisions(rows: Iterable[ScoreRow], thresholds: dict[str, float], paired: bool = True) -> Decisions:
    """Every video's decision per (detector, condition) at its detector's threshold; rows with an infrastructure
    error are left out. ``paired``: only the videos FakeR and RealR count, as a cell does (the generated videos
    paired with a real anchor, and the real videos of anchors with a generated counterpart in the same detector and
    condition); else every video with an anchor (for the label-free quantities)."""
    by_cell: dict[tuple[str, str], list[ScoreRow]] = {}
    for r in rows:
        if r.error_kind != "infra" and r.anchor_id:
            by_cell.setdefault((r.detector, r.condition), []).append(r)
    out: Decisions = {}
    for key, sel in by_cell.items():
        linked = {r.anchor_id for r in sel if r.label == "generated" and r.source}
        out[key] = {
            r.video_id: Decision(r.label, r.anchor_id, decided(r, thresholds[r.detector]))
            for r in sel
            if not paired or (r.label == "generated" and r.source) or (r.label == "real" and r.anchor_id in linked)
        }
    return out


def recall_differences(
    a: dict[str, Decision], b: dict[str, Decision], confidence: float = 0.95
) -> tuple[Estimate, Estimate]:
    """(FakeR(a) - FakeR(b), RealR(a) - RealR(b)) pooled over the videos both ``a`` and ``b`` decided, each with
    Newcombe's paired interval; :data:`~detectors.stats.estimates.NO_PAIRS` for a class without a shared video."""
    shared = sorted(a.keys() & b.keys())
    out = []
    for label in ("generated", "real"):
        videos = [v for v in shared if a[v].label == label]
        out.append(paired_difference([a[v].correct for v in videos], [b[v].correct for v in videos], confidence))
    return out[0], out[1]
