"""One cell of the paired evaluation: a (detector, condition)'s rows laid out per source and anchor, its metrics,
and their anchor-clustered bootstrap replicates (:mod:`gateway.evaluation.paired` assembles the cells).

Failures: a row with a *video* error stays in the denominators of FakeR/RealR (it counts as a miss for its
class) and is reported per cell; it cannot enter AUC, which is computed on the scored rows, with the count of
failures beside it.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Hashable
from dataclasses import dataclass, field

import numpy as np

from detectors.stats import metrics
from detectors.stats.bootstrap import percentile_interval
from gateway.core.messages import ScoreRow
from gateway.evaluation.thresholds import VERDICT, decided, has_threshold

# the bootstrapped metrics that need a decision
DECIDED = ("fake_recall", "real_recall", "bacc", "macro_f1")


@dataclass
class SourceCell:
    """One (detector, condition, generated source) pairing, laid out per anchor for the bootstrap."""

    anchors: list[str]
    # per anchor: scores of its generated counterparts from this source
    pos: list[np.ndarray]
    # per anchor: scores of its real video(s)
    neg: list[np.ndarray]
    # per anchor: counterparts flagged generated (failures count as misses)
    pos_hit: np.ndarray
    # per anchor: counterparts, failures included
    pos_n: np.ndarray
    # per anchor: reals kept as real (failures count as misses)
    neg_ok: np.ndarray
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
        # by anchor
        neg, has, starts = np.concatenate([*self.neg, []]), sizes > 0, np.cumsum(sizes) - sizes
        for i, p in enumerate(self.pos):
            # one anchor's positives against every negative at once
            if len(p) and has.any():
                # no difference: inf = inf
                above, tied = p[:, None] > neg[None, :], p[:, None] == neg[None, :]
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
    macro_f1_ci: tuple[float, float]
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
    # bootstrap replicates where undefined
    undefined_replicates: dict[str, int] = field(default_factory=dict)
    # T@x% resolves FPR = x only with at least 1/x real videos per source
    min_real_per_source: int = 0
    # decided, but no row carried a score (a chat detector's verdicts): no AUC, said so
    no_score: bool = False
    # decided by its rows' verdicts, not at a threshold (report.json: threshold null)
    by_verdict: bool = False


def source_cell(sel: list[ScoreRow], source: str, anchors: list[str], threshold: float) -> SourceCell:
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
        flagged = decided(r, threshold)
        failures += flagged is None
        scores = pos if is_pos else neg
        if r.score is not None and flagged is not None:
            scores[i].append(r.score)
        if is_pos:
            pos_n[i] += 1
            pos_hit[i] += flagged is True
        else:
            neg_n[i] += 1
            neg_ok[i] += flagged is False
    return SourceCell(
        anchors, [np.array(p) for p in pos], [np.array(n) for n in neg], pos_hit, pos_n, neg_ok, neg_n, failures
    )


def cell_metrics(
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
        sc = source_cell(sel, src, anchors, threshold)
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
        samples["macro_f1"].append(replicated.macro_f1)
    with warnings.catch_warnings():
        # a replicate where every source is undefined stays nan, and is counted
        warnings.simplefilter("ignore", RuntimeWarning)
        boot = {k: np.nanmean(np.stack(v), axis=0) for k, v in samples.items()}
    # a detector that scored nothing decided nothing: no operating point
    decided = has_threshold(threshold)
    for k in DECIDED if not decided else ():
        boot[k] = np.full_like(boot[k], np.nan)
    undefined = {k: int(np.isnan(v).sum()) for k, v in boot.items()}
    fr, rr, bacc, f1 = (
        float(np.mean([getattr(p, k) for p in points])) if decided else float("nan")
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
        macro_f1_ci=percentile_interval(boot["macro_f1"]),
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
        no_score=decided and not any(r.score is not None for r in sel),
        by_verdict=threshold == VERDICT,
    )
    return cell, boot


def _mean(xs: list[float]) -> float:
    return float(np.mean(xs)) if xs else float("nan")


# a cell and its bootstrap replicates per metric
Computed = tuple[CellMetrics, dict[str, np.ndarray]]


@dataclass(frozen=True)
class Layout:
    """What every cell of one evaluation shares: its sources, its anchors and the bootstrap's anchor counts."""

    sources: list[str]
    anchors: list[str]
    # [replicates, anchors]: one anchor draw serves every cell (bootstrap.anchor_resamples)
    weights: np.ndarray

    def cell(self, det: str, cond: str, sel: list[ScoreRow], threshold: float) -> Computed:
        """:func:`cell_metrics` of ``sel``."""
        weights = dict.fromkeys(self.sources, self.weights)
        return cell_metrics(det, cond, sel, self.sources, self.anchors, weights, threshold)

    def aucs_on_same_videos(
        self, keys: list[Hashable], selections: dict[Hashable, list[ScoreRow]], computed: dict[Hashable, Computed]
    ) -> list[tuple[float, np.ndarray]]:
        """The AUC and its bootstrap replicates of each of ``keys``'s selections, in their order, on the videos that
        every one of them scored, so that their differences are on the same videos (PROTOCOL.md: drift, and
        champion vs challenger). A selection that scored just those videos keeps its ``computed`` cell; the others
        are computed again with the videos another one failed on as failed there too (out of the AUC, still
        linking their anchors, as a failure does)."""
        shared = set.intersection(*(scored_videos(selections[k]) for k in keys))
        out = []
        for key in keys:
            cell, boot = computed[key]
            if scored_videos(selections[key]) != shared:
                kept = [r if r.video_id in shared else r.model_copy(update={"score": None}) for r in selections[key]]
                cell, boot = self.cell(cell.detector, cell.condition, kept, cell.threshold)
            out.append((cell.auc, boot["auc"]))
        return out


def scored_videos(sel: list[ScoreRow]) -> set[str]:
    """The videos of ``sel`` with a score."""
    return {r.video_id for r in sel if r.score is not None}
