"""Paired evaluation of a results file (RA-Bench §B.1-B.2, §D.3): per source against matched real anchors,
sources weighted equally, anchor-clustered bootstrap intervals stratified by source, drift and rank stability.

Bootstrap: 2,000 replicates by default, fixed seed; 95 % percentile intervals. Measured here (tests): anchors
resampled independently per source covered the true AUC only 83 % of the time when sources share anchors
(their covariance was lost); the joint anchor resampling below covers it at about the nominal rate.

Failures: a row with a *video* error stays in the denominators of FakeR/RealR (it counts as a miss for its
class) and is reported per cell; it cannot enter AUC, which is computed on the scored rows, with the count of
failures beside it. *Infra* errors (the scorer was unavailable) are counted apart and never enter a metric.
The FakeR and RealR drifts have Newcombe's paired score interval instead (:mod:`gateway.evaluation.proportions`).
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from detectors import metrics
from gateway.core.messages import ScoreRow
from gateway.evaluation import proportions
from gateway.evaluation.bootstrap import anchor_resamples, percentile_interval
from gateway.evaluation.errors import EvaluationError
from gateway.evaluation.thresholds import decision_thresholds
from transforms.spec import LASTMILE

REPLICATES = 2000
SEED = 20260831


@dataclass
class SourceCell:
    """One (detector, condition, generated source) pairing, laid out per anchor for the bootstrap."""

    anchors: list[str]
    pos: list[np.ndarray]  # per anchor: scores of its generated counterparts from this source
    neg: list[np.ndarray]  # per anchor: scores of its real video(s)
    pos_hit: np.ndarray  # per anchor: counterparts flagged generated (failures count as misses)
    pos_n: np.ndarray  # per anchor: counterparts, failures included
    neg_ok: np.ndarray  # per anchor: reals kept as real (failures count as misses)
    neg_n: np.ndarray
    failures: int = 0

    def confusion(self, weights: np.ndarray) -> metrics.Confusion:
        """Confusion counts with each anchor weighted (``[n_anchors]`` for the point estimate, all ones, or
        ``[B, n_anchors]`` bootstrap counts for one count per replicate); failures count as misses."""
        tp, n_pos, tn, n_neg = (weights @ v for v in (self.pos_hit, self.pos_n, self.neg_ok, self.neg_n))
        return metrics.Confusion(tp=tp, fn=n_pos - tp, tn=tn, fp=n_neg - tn)

    def comparison(self) -> np.ndarray:
        """C[i, j] = sum over (p of anchor i, n of anchor j) of 1[p > n] + 1/2 1[p = n]."""
        c, sizes = np.zeros((len(self.anchors), len(self.anchors))), np.array([len(n) for n in self.neg], dtype=int)
        neg, has, starts = np.concatenate([*self.neg, []]), sizes > 0, np.cumsum(sizes) - sizes  # by anchor
        for i, p in enumerate(self.pos):  # one anchor's positives against every negative at once
            if len(p) and has.any():
                above, tied = p[:, None] > neg[None, :], p[:, None] == neg[None, :]  # (no difference: inf = inf)
                c[i, has] = np.add.reduceat((above + 0.5 * tied).sum(axis=0), starts[has])
        return c


@dataclass
class CellMetrics:
    detector: str
    condition: str
    auc: float
    auc_ci: tuple[float, float]
    fake_recall: float
    fake_recall_ci: tuple[float, float]
    real_recall: float
    real_recall_ci: tuple[float, float]
    bacc: float
    bacc_ci: tuple[float, float]
    macro_f1: float
    tpr_at_1: float
    tpr_at_5: float
    fpr_at_95: float
    threshold: float
    n_generated: int
    n_real: int
    failures: int
    infra_errors: int
    per_source_auc: dict[str, float] = field(default_factory=dict)
    auc_drift: float | None = None
    auc_drift_ci: tuple[float, float] | None = None
    fake_recall_drift: float | None = None
    fake_recall_drift_ci: tuple[float, float] | None = None
    real_recall_drift: float | None = None
    real_recall_drift_ci: tuple[float, float] | None = None
    undefined_replicates: dict[str, int] = field(default_factory=dict)  # bootstrap replicates where undefined
    min_real_per_source: int = 0  # T@x% resolves FPR = x only with at least 1/x real videos per source


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
    detectors = sorted({r.detector for r in rows})
    seen = set(r.condition for r in rows)
    conditions = [c.name for c in LASTMILE if c.name in seen] + sorted(seen - {c.name for c in LASTMILE})
    sources = sorted({r.source for r in rows if r.label == "generated" and r.source})
    anchors = sorted({r.anchor_id for r in rows if r.anchor_id})
    if rows and not (sources and anchors):
        raise EvaluationError("the run has no generated videos paired with real anchors (label, source, anchor_id)")
    thr = decision_thresholds(scored, detectors, thresholds, calibrate_on_original)
    w = anchor_resamples(rows, anchors, replicates, seed)
    weights = dict.fromkeys(sources, w)
    boot: dict[tuple[str, str], dict[str, np.ndarray]] = {}
    cells = []
    for det in detectors:
        for cond in conditions:
            sel = [r for r in scored if r.detector == det and r.condition == cond]
            cell, samples = _cell(det, cond, sel, sources, anchors, weights, thr[det])
            cell.infra_errors = infra[(det, cond)]
            boot[(det, cond)] = samples
            cells.append(cell)
    _drift(cells, boot, conditions, proportions.decisions(scored, thr))
    auc = {cond: {c.detector: c.auc for c in cells if c.condition == cond} for cond in conditions}
    ranks = {cond: metrics.rank_correlation(auc["original"], auc[cond]) for cond in conditions if "original" in auc}
    return Evaluation(
        cells, ranks, detectors, conditions, sources, replicates, seed, len(anchors), len({r.video_id for r in rows})
    )


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


def _source_cell(sel: list[ScoreRow], source: str, anchors: list[str], threshold: float) -> SourceCell:
    idx = {a: i for i, a in enumerate(anchors)}
    k = len(anchors)
    pos: list[list[float]] = [[] for _ in range(k)]
    neg: list[list[float]] = [[] for _ in range(k)]
    pos_hit, pos_n, neg_ok, neg_n = (np.zeros(k) for _ in range(4))
    failures = 0
    linked = {r.anchor_id for r in sel if r.label == "generated" and r.source == source}
    for r in sel:
        if r.anchor_id not in idx or r.anchor_id not in linked:
            continue
        i = idx[r.anchor_id]
        is_pos = r.label == "generated" and r.source == source
        is_neg = r.label == "real"
        if not (is_pos or is_neg):
            continue
        failed = r.score is None
        failures += failed
        if is_pos:
            pos_n[i] += 1
            if not failed:
                pos[i].append(r.score)
                pos_hit[i] += r.score >= threshold
        else:
            neg_n[i] += 1
            if not failed:
                neg[i].append(r.score)
                neg_ok[i] += r.score < threshold
    return SourceCell(
        anchors, [np.array(p) for p in pos], [np.array(n) for n in neg], pos_hit, pos_n, neg_ok, neg_n, failures
    )


def _cell(
    det: str,
    cond: str,
    sel: list[ScoreRow],
    sources: list[str],
    anchors: list[str],
    weights: dict[str, np.ndarray],
    threshold: float,
) -> tuple[CellMetrics, dict[str, np.ndarray]]:
    per_auc, per_t1, per_t5, per_f95, reals_per_source = {}, [], [], [], []
    points: list[metrics.Confusion] = []
    samples = defaultdict(list)
    failures = 0
    n_gen = sum(r.label == "generated" for r in sel)
    n_real = sum(r.label == "real" for r in sel)
    for src in sources:
        sc = _source_cell(sel, src, anchors, threshold)
        failures += sc.failures
        y = np.r_[np.ones(sum(len(p) for p in sc.pos)), np.zeros(sum(len(n) for n in sc.neg))].astype(bool)
        s = np.r_[np.concatenate(sc.pos) if sc.pos else [], np.concatenate(sc.neg) if sc.neg else []]
        if y.any() and (~y).any():
            per_auc[src] = metrics.auc(y, s)
            per_t1.append(metrics.tpr_at_fpr(y, s, 0.01))
            per_t5.append(metrics.tpr_at_fpr(y, s, 0.05))
            per_f95.append(metrics.fpr_at_tpr(y, s, 0.95))
        points.append(sc.confusion(np.ones(len(anchors))))
        reals_per_source.append(int(sc.neg_n.sum()))
        w = weights[src]
        c = sc.comparison()
        npos, nneg = np.array([len(p) for p in sc.pos]), np.array([len(n) for n in sc.neg])
        replicated = sc.confusion(w)
        with np.errstate(invalid="ignore", divide="ignore"):
            samples["auc"].append(np.einsum("bi,ij,bj->b", w, c, w) / ((w @ npos) * (w @ nneg)))
        samples["fake_recall"].append(replicated.fake_recall)
        samples["real_recall"].append(replicated.real_recall)
        samples["bacc"].append(replicated.balanced_accuracy)
    with warnings.catch_warnings():  # a replicate where every source is undefined stays nan, and is counted
        warnings.simplefilter("ignore", RuntimeWarning)
        boot = {k: np.nanmean(np.stack(v), axis=0) for k, v in samples.items()}
    undefined = {k: int(np.isnan(v).sum()) for k, v in boot.items()}
    fr, rr, bacc, f1 = (
        float(np.mean([getattr(p, k) for p in points]))
        for k in ("fake_recall", "real_recall", "balanced_accuracy", "macro_f1")
    )
    cell = CellMetrics(
        detector=det,
        condition=cond,
        auc=float(np.mean(list(per_auc.values()))) if per_auc else float("nan"),
        auc_ci=percentile_interval(boot["auc"]),
        fake_recall=fr,
        fake_recall_ci=percentile_interval(boot["fake_recall"]),
        real_recall=rr,
        real_recall_ci=percentile_interval(boot["real_recall"]),
        bacc=bacc,
        bacc_ci=percentile_interval(boot["bacc"]),
        macro_f1=f1,
        tpr_at_1=_mean(per_t1),
        tpr_at_5=_mean(per_t5),
        fpr_at_95=_mean(per_f95),
        threshold=threshold,
        n_generated=n_gen,
        n_real=n_real,
        failures=failures,
        infra_errors=0,
        per_source_auc=per_auc,
        undefined_replicates=undefined,
        min_real_per_source=min(reals_per_source, default=0),
    )
    return cell, boot


def _mean(xs: list[float]) -> float:
    return float(np.mean(xs)) if xs else float("nan")


def _drift(cells: list[CellMetrics], boot: dict, conditions: list[str], decided: proportions.Decisions) -> None:
    """Drift = metric(condition) - metric(original). AUC: paired bootstrap (one anchor draw serves both
    conditions), each condition's scored videos, the same videos but where a video failed under one of the two
    only. FakeR and RealR: :mod:`gateway.evaluation.proportions` (the videos decided under both, a failure as a
    miss, Newcombe's paired interval); original's own drift is 0 [0, 0]."""
    if "original" not in conditions:
        return
    base = {c.detector: c for c in cells if c.condition == "original"}
    for c in cells:
        b = base[c.detector]
        auc = boot[(c.detector, c.condition)]["auc"] - boot[(c.detector, "original")]["auc"]
        c.auc_drift, c.auc_drift_ci = c.auc - b.auc, percentile_interval(auc)
        if c.condition == "original":
            fake = real = (0.0, (0.0, 0.0))
        else:
            here, there = (decided.get((c.detector, cond), {}) for cond in (c.condition, "original"))
            fake, real = proportions.recall_differences(here, there)
        (c.fake_recall_drift, c.fake_recall_drift_ci), (c.real_recall_drift, c.real_recall_drift_ci) = fake, real
