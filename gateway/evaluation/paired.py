"""Paired evaluation of a results file (RA-Bench §B.1-B.2, §D.3): per source against matched real anchors,
sources weighted equally, anchor-clustered bootstrap intervals stratified by source, drift and rank stability.

Bootstrap: 2,000 replicates by default, fixed seed; 95 % percentile intervals. Measured here (tests): anchors
resampled independently per source covered the true AUC only 83 % of the time when sources share anchors
(their covariance was lost); the joint anchor resampling below covers it at about the nominal rate. The FakeR
and RealR drifts' intervals also hold Newcombe's paired score interval (:mod:`gateway.evaluation.proportions`).

Each (detector, condition) is a cell (:mod:`gateway.evaluation.cells`: how failures count). *Infra* errors (the
scorer was unavailable) are counted apart and never enter a metric.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from detectors.stats import estimates, metrics
from detectors.stats.bootstrap import percentile_interval
from gateway.core.messages import ScoreRow
from gateway.evaluation import proportions
from gateway.evaluation.bootstrap import anchor_resamples
from gateway.evaluation.cells import CellMetrics, Layout
from gateway.evaluation.chat import ChatCell, chat_cells
from gateway.evaluation.errors import EvaluationError
from gateway.evaluation.thresholds import decision_thresholds, has_threshold
from transforms.names import dissemination_order

REPLICATES = 2000
SEED = 20260831


@dataclass
class Evaluation:
    cells: list[CellMetrics]
    rank_correlation: dict[str, float]
    detectors: list[str]
    conditions: list[str]
    sources: list[str]
    replicates: int
    seed: int
    anchors: int
    videos: int
    # the RealR the thresholds were recalibrated to on original; None: the cards'
    calibrated: float | None = None
    # what chat detectors add (gateway/evaluation/chat.py)
    chat: list[ChatCell] = field(default_factory=list)

    def cell(self, detector: str, condition: str) -> CellMetrics:
        return next(c for c in self.cells if c.detector == detector and c.condition == condition)


def evaluate(
    rows: list[ScoreRow],
    replicates: int = REPLICATES,
    seed: int = SEED,
    thresholds: dict[str, float] | None = None,
    calibrate_on_original: float | None = None,
) -> Evaluation:
    """Every metric of the protocol per (detector, condition), with bootstrap 95 % intervals.

    Thresholds: the rows' own (the model card's) unless ``thresholds`` overrides them, or
    ``calibrate_on_original`` (a target RealR) recalibrates each detector on this run's ``original`` reals.
    A detector with rows of several versions is evaluated per version, as ``DETECTOR@VERSION``: each version's
    cells, on its own rows, at its own threshold.
    """
    rows = by_version(rows)
    scored = [r for r in rows if r.error_kind != "infra"]
    infra = defaultdict(int)
    for r in rows:
        if r.error_kind == "infra":
            infra[(r.detector, r.condition)] += 1
    detectors, conditions = sorted({r.detector for r in rows}), ordered_conditions(rows)
    sources = sorted({r.source for r in rows if r.label == "generated" and r.source})
    anchors = sorted({r.anchor_id for r in rows if r.anchor_id})
    if rows and not (sources and anchors):
        raise EvaluationError("the run has no generated videos paired with real anchors (label, source, anchor_id)")
    thr = decision_thresholds(scored, detectors, thresholds, calibrate_on_original)
    layout = Layout(sources, anchors, anchor_resamples(rows, anchors, replicates, seed))
    computed, selections = {}, {}
    for det in detectors:
        for cond in conditions:
            selections[det, cond] = [r for r in scored if r.detector == det and r.condition == cond]
            computed[det, cond] = layout.cell(det, cond, selections[det, cond], thr[det])
            computed[det, cond][0].infra_errors = infra[(det, cond)]
    cells = [cell for cell, _ in computed.values()]
    _drift(layout, selections, computed, conditions, proportions.decisions(scored, thr))
    auc = {cond: {c.detector: c.auc for c in cells if c.condition == cond} for cond in conditions}
    ranks = {cond: metrics.rank_correlation(auc["original"], auc[cond]) for cond in conditions if "original" in auc}
    return Evaluation(
        cells,
        ranks,
        detectors,
        conditions,
        sources,
        replicates,
        seed,
        len(anchors),
        len({r.video_id for r in rows}),
        calibrate_on_original,
        chat_cells(layout, selections, thr),
    )


def ordered_conditions(rows: list[ScoreRow]) -> list[str]:
    """The conditions of ``rows``: the protocol's in its order, then any other (a sweep's values) sorted."""
    return dissemination_order(r.condition for r in rows)


def by_version(rows: list[ScoreRow]) -> list[ScoreRow]:
    """``rows`` with each detector that has rows of several versions named ``DETECTOR@VERSION`` (a single version
    keeps its name): one run may hold a detector's versions side by side (docs/ab.md), never one cell of both."""
    versions = defaultdict(set)
    for r in rows:
        versions[r.detector].add(r.detector_version)
    several = {d for d, v in versions.items() if len(v) > 1}
    if not several:
        return rows
    return [
        r.model_copy(update={"detector": f"{r.detector}@{r.detector_version}"}) if r.detector in several else r
        for r in rows
    ]


def _drift(layout: Layout, selections: dict, computed: dict, conditions: list[str], decided: dict) -> None:
    """Drift = metric(condition) - metric(original), on the same videos, with paired intervals (one anchor draw
    serves both conditions). AUC: on the videos scored under both (a video failed under one of the two leaves
    both, :meth:`~gateway.evaluation.cells.Layout.aucs_on_same_videos`). FakeR and RealR: every video, a failure a
    miss, the interval widened to hold Newcombe's too (:mod:`gateway.evaluation.proportions`)."""
    if "original" not in conditions:
        return
    for (det, cond), (c, boot) in computed.items():
        keys = [(det, cond), (det, "original")]
        b, boot0 = computed[keys[1]]
        (here, auc), (there, auc0) = layout.aucs_on_same_videos(keys, selections, computed)
        c.auc_drift, c.auc_drift_ci = here - there, percentile_interval(auc - auc0)
        if not has_threshold(c.threshold):
            # it scored nothing: no decision, so no FakeR or RealR to drift
            continue
        scores = proportions.recall_differences(decided.get(keys[0], {}), decided.get(keys[1], {}))
        for key, score in zip(("fake_recall", "real_recall"), scores, strict=True):
            drift = (getattr(c, key) - getattr(b, key), percentile_interval(boot[key] - boot0[key]))
            if cond != "original":
                # original's own: 0 [0, 0], or undefined
                drift = estimates.widened(drift, score)
            setattr(c, f"{key}_drift", drift[0])
            setattr(c, f"{key}_drift_ci", drift[1])
