"""Detection metrics of the LastMile protocol: pure functions with validated inputs.

Conventions (RA-Bench, arXiv 2608.14391, §B.1-B.2 and §D.3): ``y_true`` is 1 (True) for generated videos
(positives) and 0 for real ones; scores are higher = more likely generated. Every function raises
:class:`MetricError` (a ``ValueError``) on malformed input rather than returning a silent NaN; degenerate but
well-formed cases (one class present) return ``nan`` where the quantity is undefined, and say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from detectors.stats.errors import MetricError
from detectors.stats.inputs import labels, labels_and_scores, undefined
from detectors.stats.ties import average_ranks


def auc(y_true: Sequence | np.ndarray, scores: Sequence | np.ndarray) -> float:
    """ROC AUC by the Mann-Whitney statistic, ties counted 1/2.

    AUC = (R_pos - n_pos (n_pos + 1) / 2) / (n_pos n_neg), with R_pos the sum of the positives' mid-ranks
    (Mann & Whitney 1947; Hanley & McNeil 1982). Equals scikit-learn's ``roc_auc_score``. ``nan`` when only
    one class is present.
    """
    y, s = labels_and_scores(y_true, scores)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return undefined("AUC with only one class present")
    ranks = average_ranks(s)  # ties get 1/2
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def roc_points(
    y_true: Sequence | np.ndarray, scores: Sequence | np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The complete ROC: (fpr, tpr, thresholds) at every distinct score, from (0, 0) at +inf down.

    A video is flagged generated when ``score >= threshold``. Same points as scikit-learn's ``roc_curve``
    with ``drop_intermediate=False``.
    """
    y, s = labels_and_scores(y_true, scores)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        raise MetricError("the ROC needs both classes")
    order = np.argsort(-s, kind="mergesort")
    s_sorted, y_sorted = s[order], y[order]
    distinct = np.r_[np.nonzero(np.diff(s_sorted))[0], len(s) - 1]
    tps = np.cumsum(y_sorted)[distinct]
    fps = (distinct + 1) - tps
    return np.r_[0.0, fps / n_neg], np.r_[0.0, tps / n_pos], np.r_[np.inf, s_sorted[distinct]]


def tpr_at_fpr(y_true: Sequence | np.ndarray, scores: Sequence | np.ndarray, max_fpr: float) -> float:
    """T@x%: the largest TPR over ROC points whose FPR <= ``max_fpr`` (x = 1 %, 5 % in the paper).

    Read off the complete ROC (no interpolation). Random ranking gives about ``max_fpr``.
    """
    if not 0 <= max_fpr <= 1:
        raise MetricError("max_fpr must lie in [0, 1]")
    fpr, tpr, _ = roc_points(y_true, scores)
    return float(tpr[fpr <= max_fpr + 1e-12].max())


def fpr_at_tpr(y_true: Sequence | np.ndarray, scores: Sequence | np.ndarray, min_tpr: float = 0.95) -> float:
    """F@95%: the smallest FPR over ROC points whose TPR >= ``min_tpr``. Random ranking gives about 95 %."""
    if not 0 <= min_tpr <= 1:
        raise MetricError("min_tpr must lie in [0, 1]")
    fpr, tpr, _ = roc_points(y_true, scores)
    return float(fpr[tpr >= min_tpr - 1e-12].min())


def decisions(scores: Sequence | np.ndarray, threshold: float) -> np.ndarray:
    """A fixed decision rule: generated when ``score >= threshold``."""
    s = np.asarray(scores, dtype=np.float64)
    if np.isnan(s).any():
        raise MetricError("NaN score(s)")
    return s >= threshold


@dataclass(frozen=True)
class Confusion:
    """Confusion counts of one fixed decision rule, generated = positive; every discrete metric derives from it.

    Counts may be floats or numpy arrays (bootstrap replicates: weighted counts, one entry per replicate), so
    one definition serves the point estimate and its resamples. A failed video counts as a miss for its class.

    - FakeR = TP / (TP + FN), RealR = TN / (TN + FP) (RA-Bench §B.2); ``nan`` where the class is absent.
    - BAcc = (FakeR + RealR) / 2 (Brodersen et al. 2010).
    - macro-F1 = mean over the two classes of F1 = 2 TP / (2 TP + FP + FN), a class taken as positive in turn;
      a class with no true and no predicted members has F1 = 0 (scikit-learn's ``zero_division=0``).
    """

    tp: float | np.ndarray
    fn: float | np.ndarray
    tn: float | np.ndarray
    fp: float | np.ndarray

    @classmethod
    def from_predictions(cls, y_true: Sequence | np.ndarray, y_pred: Sequence | np.ndarray) -> Confusion:
        y = labels(y_true)
        p = labels(y_pred)
        if p.shape != y.shape:
            raise MetricError("y_pred and y_true differ in shape")
        return cls(tp=int((p & y).sum()), fn=int((~p & y).sum()), tn=int((~p & ~y).sum()), fp=int((p & ~y).sum()))

    @property
    def fake_recall(self) -> float | np.ndarray:
        return _ratio(self.tp, self.tp + self.fn, what="FakeR with no generated video")

    @property
    def real_recall(self) -> float | np.ndarray:
        return _ratio(self.tn, self.tn + self.fp, what="RealR with no real video")

    @property
    def balanced_accuracy(self) -> float | np.ndarray:
        return (self.fake_recall + self.real_recall) / 2

    @property
    def macro_f1(self) -> float | np.ndarray:
        f_gen = _ratio(2 * self.tp, 2 * self.tp + self.fp + self.fn, empty=0.0)
        f_real = _ratio(2 * self.tn, 2 * self.tn + self.fn + self.fp, empty=0.0)
        return (f_gen + f_real) / 2


def _ratio(
    num: float | np.ndarray, den: float | np.ndarray, empty: float = float("nan"), what: str = ""
) -> float | np.ndarray:
    """num / den, ``empty`` where den is 0 (elementwise for arrays: bootstrap replicates are counted by the
    caller, not warned one by one); a scalar that is undefined warns."""
    if np.ndim(den) == 0:
        if den:
            return float(num / den)
        return undefined(what) if what and np.isnan(empty) else empty
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    out = np.full(den.shape, empty)
    np.divide(num, den, out=out, where=den != 0)
    return out


def recall_at(y_true: Sequence | np.ndarray, y_pred: Sequence | np.ndarray, positive: bool = True) -> float:
    """Recall of one class: FakeR (``positive=True``, generated) or RealR (``positive=False``, real).

    FakeR = TP / (TP + FN), RealR = TN / (TN + FP). ``nan`` when the class is absent.
    """
    c = Confusion.from_predictions(y_true, y_pred)
    return c.fake_recall if positive else c.real_recall


def balanced_accuracy(y_true: Sequence | np.ndarray, y_pred: Sequence | np.ndarray) -> float:
    """BAcc = (FakeR + RealR) / 2 (Brodersen et al. 2010); scikit-learn's ``balanced_accuracy_score``."""
    return Confusion.from_predictions(y_true, y_pred).balanced_accuracy


def macro_f1(y_true: Sequence | np.ndarray, y_pred: Sequence | np.ndarray) -> float:
    """Macro-F1 over the two classes: mean of F1 = 2 TP / (2 TP + FP + FN) for each class taken as positive.

    A class with no true and no predicted members has F1 = 0, as scikit-learn's ``zero_division=0``.
    """
    return float(Confusion.from_predictions(y_true, y_pred).macro_f1)


def calibrate_threshold(real_scores: Sequence | np.ndarray, target_real_recall: float = 0.95) -> float:
    """The smallest threshold that makes RealR reach ``target_real_recall`` on these real videos (PROTOCOL.md).

    A video is flagged generated when ``score >= t``, so RealR(t) = #{s < t} / n, a step function that rises
    just after each score. With m = ceil(target n), the real scores' m-th smallest value v is the first at
    which #{s <= v} >= m: RealR reaches the target for every t > v and for no t <= v, so the threshold is the
    next float above v. Ties are handled because the count includes all of v's ties. Fixed once on
    ``original`` and held for every condition, so FakeR drift is visible.
    """
    s = np.asarray(real_scores, dtype=np.float64)
    if s.ndim != 1 or len(s) == 0:
        raise MetricError("need a non-empty 1-D array of real scores")
    if np.isnan(s).any():
        raise MetricError("NaN real score(s)")
    if not 0 < target_real_recall < 1:
        raise MetricError("target_real_recall must lie in (0, 1)")
    m = int(np.ceil(target_real_recall * len(s) - 1e-9))  # the tolerance keeps 0.95 * 20 = 19, not 19.000000000000004
    v = np.sort(s)[max(m, 1) - 1]
    return float(np.nextafter(v, np.inf))


def spearman(a: Sequence | np.ndarray, b: Sequence | np.ndarray) -> float:
    """Spearman's rho: Pearson correlation of the average ranks (scipy's ``spearmanr``); nan if a side is constant.

    rho = cov(rank(a), rank(b)) / (sd(rank(a)) sd(rank(b))) (Spearman 1904), ties given average ranks.
    """
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise MetricError("spearman needs two 1-D arrays of equal length >= 2")
    rx, ry = average_ranks(x), average_ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


def rank_correlation(auc_original: dict[str, float], auc_condition: dict[str, float]) -> float:
    """Ranking stability: Spearman correlation of detectors' AUCs on ``original`` vs one condition (§D.3)."""
    names = sorted(set(auc_original) & set(auc_condition))
    if len(names) < 2:
        return float("nan")
    return spearman([auc_original[n] for n in names], [auc_condition[n] for n in names])
