"""Evaluation of a run of real videos only (a platform's own footage, with no generated counterpart): RealR, the
share of real videos a detector keeps real at its fixed threshold, per condition, and its drift from ``original``:
how many more of your real uploads a detector flags once they are disseminated (RA-Bench §D.3's operating-point
drift, on the real class alone). AUC and FakeR need generated videos, so this evaluation has neither.

RealR here pools the run's real videos (there is no generation source to weight). Its 95 % interval is the hull
(:func:`detectors.stats.estimates.widened`) of the anchor-clustered percentile bootstrap (videos that share an
``anchor_id`` are resampled together) and Wilson's score interval; the drift's, of the paired bootstrap (one draw
serves both conditions) and Newcombe's paired score interval: the bootstrap alone collapses to [100, 100] when
every video is kept real, which a handful of clips often are. A video error is a miss (a real video not kept
real), as in the paired evaluation; an infrastructure error is no decision and is counted apart.

Champion against challenger on a run of real videos only: per condition, each contender's RealR on the real
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
from collections import Counter
from dataclasses import dataclass

import numpy as np

from detectors.stats import estimates
from detectors.stats.bootstrap import percentile_interval
from gateway.core import ab_quantities as ab
from gateway.core.ab_quantities import ROLES
from gateway.core.messages import ScoreRow
from gateway.evaluation import proportions
from gateway.evaluation.bootstrap import anchor_resamples
from gateway.evaluation.compare import (
    Contender,
    Estimate,
    PairComparison,
    Prepared,
    label_free,
)
from gateway.evaluation.compare_report import estimate_cell, thresholds_note
from gateway.evaluation.errors import EvaluationError
from gateway.evaluation.paired import REPLICATES, SEED, by_version, ordered_conditions
from gateway.evaluation.tables import Table, TableRow
from gateway.evaluation.thresholds import decision_thresholds, has_threshold


@dataclass
class RealsCell:
    """One (detector, condition) of a reals-only run."""

    detector: str
    condition: str
    real_recall: float
    real_recall_ci: tuple[float, float]
    threshold: float
    # real videos decided, failures included
    n_real: int
    # of them, video errors (misses)
    failures: int
    # rows without a decision, in no metric
    infra_errors: int
    # None on original
    real_recall_drift: float | None = None
    real_recall_drift_ci: tuple[float, float] | None = None
    # of the videos kept real on original and decided here; None on original
    flips_to_generated: float | None = None
    flips_to_generated_ci: tuple[float, float] | None = None


@dataclass
class RealsEvaluation:
    cells: list[RealsCell]
    detectors: list[str]
    conditions: list[str]
    replicates: int
    seed: int
    anchors: int
    videos: int
    # the RealR the thresholds were recalibrated to on original; None: the cards'
    calibrated: float | None = None

    def cell(self, detector: str, condition: str) -> RealsCell:
        return next(c for c in self.cells if c.detector == detector and c.condition == condition)


def is_reals_only(rows: list[ScoreRow]) -> bool:
    """A run with rows, every one of a real video: :func:`evaluate_reals` measures it, not the paired evaluation."""
    return bool(rows) and all(r.label == "real" for r in rows)


def own_anchors(rows: list[ScoreRow]) -> list[ScoreRow]:
    """``rows`` with a video that has no ``anchor_id`` its own anchor (none is left out of the bootstrap)."""
    return [r if r.anchor_id else r.model_copy(update={"anchor_id": r.video_id}) for r in rows]


def evaluate_reals(
    rows: list[ScoreRow],
    replicates: int = REPLICATES,
    seed: int = SEED,
    thresholds: dict[str, float] | None = None,
    calibrate_on_original: float | None = None,
) -> RealsEvaluation:
    """RealR per (detector, condition) with its 95 % interval, and its drift from ``original`` with a paired one.

    Thresholds as in :func:`gateway.evaluation.paired.evaluate`: the rows' own (the cards'), ``thresholds``, or
    recalibrated to RealR ``calibrate_on_original`` on ``original`` (where that RealR is then the target, by
    construction, and only the drifts tell). A detector with several versions is evaluated per version."""
    if not is_reals_only(rows):
        raise EvaluationError("a reals-only evaluation needs rows, every one of a real video")
    rows = own_anchors(by_version(rows))
    scored = [r for r in rows if r.error_kind != "infra"]
    detectors, conditions = sorted({r.detector for r in rows}), ordered_conditions(rows)
    # a video without one is its own: none is left out
    anchors = sorted({r.anchor_id for r in rows})
    thr = decision_thresholds(scored, detectors, thresholds, calibrate_on_original)
    decided = proportions.decisions(scored, thr, paired=False)
    weights = anchor_resamples(rows, anchors, replicates, seed)
    infra = Counter((r.detector, r.condition) for r in rows if r.error_kind == "infra")
    index = {a: i for i, a in enumerate(anchors)}
    cells, boots = [], {}
    for det in detectors:
        for cond in conditions:
            here = decided.get((det, cond), {})
            kept, n = _per_anchor(here, index)
            (point, ci), boots[det, cond] = estimates.clustered_share(kept, n, weights)
            if not has_threshold(thr[det]):
                # it scored nothing: no decision, no RealR; its failures are counted
                point, ci = float("nan"), (float("nan"), float("nan"))
            failures = sum(d.flagged is None for d in here.values())
            cells.append(RealsCell(det, cond, point, ci, thr[det], int(n.sum()), failures, infra[det, cond]))
    ev = RealsEvaluation(
        cells,
        detectors,
        conditions,
        replicates,
        seed,
        len(anchors),
        len({r.video_id for r in rows}),
        calibrate_on_original,
    )
    _drift(ev, boots, decided)
    _flips(ev, decided, index, weights)
    return ev


def _per_anchor(decisions: dict[str, proportions.Decision], index: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Per anchor: its real videos kept real (a failure is not), and its real videos decided."""
    kept, n = np.zeros(len(index)), np.zeros(len(index))
    for d in decisions.values():
        n[index[d.anchor]] += 1
        kept[index[d.anchor]] += d.correct
    return kept, n


def _drift(ev: RealsEvaluation, boots: dict, decided: proportions.Decisions) -> None:
    """RealR(condition) - RealR(original): point on every video of each, interval the hull of the paired
    bootstrap's and Newcombe's on the videos decided under both."""
    if "original" not in ev.conditions:
        return
    for c in ev.cells:
        if c.condition == "original" or not has_threshold(c.threshold):
            continue
        base = ev.cell(c.detector, "original")
        boot = percentile_interval(boots[c.detector, c.condition] - boots[c.detector, "original"])
        _, score = proportions.recall_differences(
            decided.get((c.detector, c.condition), {}), decided.get((c.detector, "original"), {})
        )
        drift = estimates.widened((c.real_recall - base.real_recall, boot), score)
        c.real_recall_drift, c.real_recall_drift_ci = drift


def _flips(ev: RealsEvaluation, decided: proportions.Decisions, index: dict[str, int], weights: np.ndarray) -> None:
    """Flips to generated (PROTOCOL.md): of the real videos kept real on original and decided under the condition,
    the share decided generated there; the interval the hull of the anchor-clustered bootstrap's and Wilson's.
    Unlike the drift, it is not net of videos that a condition clears: a drift of 0 can hide flips both ways."""
    if "original" not in ev.conditions:
        return
    for c in ev.cells:
        if c.condition == "original":
            continue
        base = decided.get((c.detector, "original"), {})
        flipped, kept = np.zeros(len(index)), np.zeros(len(index))
        for video, d in decided.get((c.detector, c.condition), {}).items():
            b = base.get(video)
            if d.flagged is None or b is None or b.flagged is not False:
                # kept real on original, decided here
                continue
            kept[index[d.anchor]] += 1
            flipped[index[d.anchor]] += d.flagged
        (c.flips_to_generated, c.flips_to_generated_ci), _ = estimates.clustered_share(flipped, kept, weights)


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
    # challenger minus champion
    real_recall_difference: Estimate
    disagreement: Estimate
    videos: int


@dataclass
class RealsComparison(PairComparison[RealsContrast]):
    """The comparison of a run of real videos only (its ``kind`` says so in report.json)."""

    kind: str = "reals_only"


def compare_reals(pair: Prepared, champion: Contender, challenger: Contender) -> RealsComparison:
    """The comparison of ``pair`` (:func:`~gateway.evaluation.compare.shared_rows`' rows of a reals-only run, each
    video with an anchor: :func:`own_anchors`), each contender deciding at its card's threshold or at the one giving
    RealR ``calibrate`` on its original reals."""
    thr = pair.thresholds
    index = {a: i for i, a in enumerate(pair.anchors)}
    decides = tuple(has_threshold(thr[role]) for role in ROLES)
    contrasts = [_contrast(cond, pair, index, decides) for cond in pair.conditions]
    return RealsComparison.of(pair, champion, challenger, contrasts)


def _contrast(cond: str, pair: Prepared, index: dict[str, int], decides: tuple[bool, bool]) -> RealsContrast:
    """Both RealRs, their difference and the disagreement under ``cond``; ``decides``: whether each contender
    has a threshold (a contender that scored nothing has none, and its RealR and the difference are undefined)."""
    champ, chall = (pair.decided.get((role, cond), {}) for role in ROLES)
    shared = sorted(champ.keys() & chall.keys())
    n, kept_h, kept_c = (np.zeros(len(index)) for _ in range(3))
    for video in shared:
        i = index[champ[video].anchor]
        n[i] += 1
        kept_h[i] += champ[video].correct
        kept_c[i] += chall[video].correct
    kept = (kept_h, kept_c)
    (recall_h, boot_h), (recall_c, boot_c) = (estimates.clustered_share(k, n, pair.weights) for k in kept)
    if not all(decides):
        pairs = zip((recall_h, recall_c), decides, strict=True)
        recall_h, recall_c = (r if ok else estimates.NO_PAIRS for r, ok in pairs)
        return RealsContrast(cond, recall_h, recall_c, estimates.NO_PAIRS, estimates.NO_PAIRS, len(shared))
    bootstrap = (ab.difference(recall_c[0], recall_h[0]), percentile_interval(ab.difference(boot_c, boot_h)))
    # Newcombe's on the videos both decided, as above
    _, newcombe = proportions.recall_differences(chall, champ)
    disagreement, _ = label_free(pair.decided, cond, pair.anchors, pair.weights)
    difference = estimates.widened(bootstrap, newcombe) if shared else estimates.NO_PAIRS
    return RealsContrast(cond, recall_h, recall_c, difference, disagreement, len(shared))


def reals_comparison_table(cmp: RealsComparison) -> Table:
    """The comparison as the report shows it: one row per condition."""
    rows = tuple(
        TableRow(
            (
                c.condition,
                str(c.videos),
                estimate_cell(c.champion_real_recall, False),
                estimate_cell(c.challenger_real_recall, False),
                estimate_cell(c.real_recall_difference),
                estimate_cell(c.disagreement, False),
            )
        )
        for c in cmp.conditions
    )
    notes = (NOTE, thresholds_note(cmp))
    header = ("condition", "real videos", f"RealR {cmp.champion}", f"RealR {cmp.challenger}", "ΔRealR", "disagree")
    return Table(f"{cmp.challenger} (challenger) vs {cmp.champion} (champion), real videos only", header, rows, notes)


def reals_comparisons_json(comparisons: list[RealsComparison], notice: str | None = None) -> list[dict]:
    """The comparisons' numbers as JSON-ready dicts, each with the footage's ``notice`` (None where none)."""
    return [dataclasses.asdict(c) | {"corpus_notice": notice} for c in comparisons]
