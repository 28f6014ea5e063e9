"""Champion against challenger on a run of real videos only: per condition, each contender's RealR on the real
videos both decided, the challenger's minus the champion's, and the share of those videos the two decide
differently.

A platform with real uploads and no generated counterpart can still ask the A/B question that matters to it first:
does the new detector (or version) flag more of our real videos, and more so once they are disseminated? Only
(video, condition) pairs both contenders have a row for count (:func:`~gateway.evaluation.compare.shared_rows`),
and of those only the videos both decided (an infrastructure error is no decision, on either side); a video error
is a miss of the detector that failed, as in RealR. The ΔRealR interval is the hull of the anchor-clustered
paired bootstrap's (one anchor draw serves both contenders) and Newcombe's paired score interval (method 10);
the share decided differently, of the same bootstrap's and Wilson's (:mod:`gateway.evaluation.proportions` says
why neither alone). A contender that scored nothing decided nothing: its RealR and ΔRealR are undefined.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from detectors.stats import estimates
from detectors.stats.bootstrap import percentile_interval
from gateway.core.messages import ScoreRow
from gateway.evaluation import proportions
from gateway.evaluation.bootstrap import anchor_resamples
from gateway.evaluation.compare import ROLES, Contender, Estimate
from gateway.evaluation.compare_report import estimate_cell, thresholds_note
from gateway.evaluation.paired import REPLICATES, SEED, ordered_conditions
from gateway.evaluation.reals import own_anchors
from gateway.evaluation.tables import Row, Table
from gateway.evaluation.thresholds import decision_thresholds, has_threshold

NOTE = (
    "On the real videos both contenders decided under each condition: each RealR (%) and the challenger's minus "
    "the champion's (ΔRealR, in points; below 0: the challenger flags more real videos), with 95% intervals, the "
    "hull of the anchor-clustered paired bootstrap's and Newcombe's paired score interval (method 10); disagree: "
    "the share of those videos the two decide differently (Wilson's for the score interval)."
)


@dataclass
class RealsContrast:
    """Challenger against champion under one condition, on the real videos both decided."""

    condition: str
    champion_real_recall: Estimate
    challenger_real_recall: Estimate
    real_recall_difference: Estimate  # challenger minus champion
    disagreement: Estimate
    videos: int


@dataclass
class RealsComparison:
    champion: str
    challenger: str
    thresholds: dict[str, float]
    conditions: list[RealsContrast]
    anchors: int
    replicates: int
    seed: int
    calibrated: float | None = None
    kind: str = "reals_only"

    def condition(self, name: str) -> RealsContrast:
        return next(c for c in self.conditions if c.condition == name)


def compare_reals(
    pair: list[ScoreRow],
    champion: Contender,
    challenger: Contender,
    replicates: int = REPLICATES,
    seed: int = SEED,
    calibrate: float | None = None,
) -> RealsComparison:
    """The comparison of ``pair`` (:func:`~gateway.evaluation.compare.shared_rows`' rows of a reals-only run), each
    contender deciding at its card's threshold or at the one giving RealR ``calibrate`` on its original reals."""
    pair = own_anchors(pair)
    scored = [r for r in pair if r.error_kind != "infra"]
    thr = decision_thresholds(scored, list(ROLES), None, calibrate)
    decided = proportions.decisions(scored, thr, paired=False)
    anchors = sorted({r.anchor_id for r in pair})
    weights = anchor_resamples(pair, anchors, replicates, seed)
    index = {a: i for i, a in enumerate(anchors)}
    decides = tuple(has_threshold(thr[role]) for role in ROLES)
    contrasts = [_contrast(cond, decided, index, weights, decides) for cond in ordered_conditions(pair)]
    return RealsComparison(str(champion), str(challenger), thr, contrasts, len(anchors), replicates, seed, calibrate)


def _contrast(
    cond: str, decided: proportions.Decisions, index: dict[str, int], weights: np.ndarray, decides: tuple[bool, bool]
) -> RealsContrast:
    """Both RealRs, their difference and the disagreement under ``cond``; ``decides``: whether each contender
    has a threshold (a contender that scored nothing has none, and its RealR and the difference are undefined)."""
    champ, chall = (decided.get((role, cond), {}) for role in ROLES)
    shared = sorted(champ.keys() & chall.keys())
    n, kept_h, kept_c, both, differ = (np.zeros(len(index)) for _ in range(5))
    for video in shared:
        h, c = champ[video], chall[video]
        i = index[h.anchor]
        n[i] += 1
        kept_h[i] += h.correct
        kept_c[i] += c.correct
        if None not in (h.flagged, c.flagged):  # (decided by both: a failure is no decision to disagree with)
            both[i] += 1
            differ[i] += h.flagged != c.flagged
    (recall_h, boot_h), (recall_c, boot_c) = (estimates.clustered_share(k, n, weights) for k in (kept_h, kept_c))
    if not all(decides):
        pairs = zip((recall_h, recall_c), decides, strict=True)
        recall_h, recall_c = (r if ok else estimates.NO_PAIRS for r, ok in pairs)
        return RealsContrast(cond, recall_h, recall_c, estimates.NO_PAIRS, estimates.NO_PAIRS, len(shared))
    bootstrap = (recall_c[0] - recall_h[0], percentile_interval(boot_c - boot_h))
    _, newcombe = proportions.recall_differences(chall, champ)  # (on the videos both decided, as above)
    disagreement, _ = estimates.clustered_share(differ, both, weights)
    difference = estimates.widened(bootstrap, newcombe) if shared else estimates.NO_PAIRS
    return RealsContrast(cond, recall_h, recall_c, difference, disagreement, len(shared))


def reals_comparison_table(cmp: RealsComparison) -> Table:
    """The comparison as the report shows it: one row per condition."""
    rows = tuple(
        Row((c.condition, str(c.videos), estimate_cell(c.champion_real_recall, False),
             estimate_cell(c.challenger_real_recall, False), estimate_cell(c.real_recall_difference),
             estimate_cell(c.disagreement, False)))
        for c in cmp.conditions
    )  # fmt: skip
    notes = (NOTE, thresholds_note(cmp))
    header = ("condition", "real videos", f"RealR {cmp.champion}", f"RealR {cmp.challenger}", "ΔRealR", "disagree")
    return Table(f"{cmp.challenger} (challenger) vs {cmp.champion} (champion), real videos only", header, rows, notes)


def reals_comparisons_json(comparisons: list[RealsComparison], notice: str | None = None) -> list[dict]:
    """The comparisons' numbers as JSON-ready dicts, each with the footage's ``notice`` (None where none)."""
    return [dataclasses.asdict(c) | {"corpus_notice": notice} for c in comparisons]
