"""Champion against challenger on the same videos, offline: per condition, each quantity of
:mod:`gateway.core.ab_quantities` with its 95 % interval, by the anchor-clustered bootstrap.

Only (video, condition) pairs both detectors have a row for count (:func:`shared_rows`); of those, a pair one
detector scored and the other failed on stays (the failure is that detector's miss in FakeR/RealR), and
infrastructure failures are left out of every quantity. :class:`Prepared` is what every comparison of a pair starts
from, this one and the reals-only one (:mod:`gateway.evaluation.reals`): thresholds (the cards', or recalibrated),
decisions, and one anchor draw of :mod:`gateway.evaluation.bootstrap` that serves both detectors and every
condition, so each replicate keeps their covariance. The AUC and robustness differences take the bootstrap's
interval; the FakeR, RealR and flip-rate differences and the disagreement share the hull of the bootstrap's and a
score interval's, Newcombe's or Wilson's (:mod:`gateway.evaluation.proportions` says why).

Written out by :mod:`gateway.evaluation.compare_report` (tables, cautions, files) and
:mod:`gateway.evaluation.plots` (forest plots).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, Self, TypeVar

import numpy as np

from detectors.stats import estimates
from detectors.stats.bootstrap import percentile_interval
from gateway.core import ab_quantities as ab
from gateway.core.ab_quantities import ROLES
from gateway.core.contenders import Contender, PairError, distinct_pairs, split_pair
from gateway.core.messages import ScoreRow
from gateway.evaluation import proportions
from gateway.evaluation.bootstrap import anchor_resamples
from gateway.evaluation.cells import Layout
from gateway.evaluation.errors import EvaluationError
from gateway.evaluation.paired import REPLICATES, SEED, ordered_conditions
from gateway.evaluation.thresholds import decision_thresholds

# point estimate, 95% interval
Estimate = estimates.Estimate


@dataclass
class ConditionContrast:
    """Challenger minus champion under one condition (robustness and flips: against ``original``)."""

    condition: str
    auc_difference: Estimate
    # None on original itself
    robustness_difference: Estimate | None
    fake_recall_difference: Estimate
    real_recall_difference: Estimate
    disagreement: Estimate
    flip_rate_difference: Estimate | None
    # scored by both under this condition
    videos: int
    generated: int
    real: int


Contrast = TypeVar("Contrast")


@dataclass
class PairComparison(Generic[Contrast]):
    """What every comparison of a pair states, this one and the reals-only one: its contenders, their thresholds,
    a contrast per condition, and the bootstrap it took."""

    champion: str
    challenger: str
    thresholds: dict[str, float]
    conditions: list[Contrast]
    anchors: int
    replicates: int
    seed: int
    # the RealR the thresholds were recalibrated to on original; None: the cards'
    calibrated: float | None = None

    @classmethod
    def of(cls, pair: Prepared, champion: Contender, challenger: Contender, conditions: list[Contrast]) -> Self:
        """The comparison of ``pair`` with a contrast per condition."""
        anchors, replicates, seed = len(pair.anchors), pair.replicates, pair.seed
        return cls(
            str(champion), str(challenger), pair.thresholds, conditions, anchors, replicates, seed, pair.calibrated
        )

    def condition(self, name: str) -> Contrast:
        return next(c for c in self.conditions if c.condition == name)


@dataclass
class Comparison(PairComparison[ConditionContrast]):
    """The comparison of a run with generated videos, and its cautions (:func:`comparison_warnings`): what a reader
    must know first."""

    warnings: list[str] = field(default_factory=list)


def shared_rows(rows: list[ScoreRow], champion: Contender, challenger: Contender) -> list[ScoreRow]:
    """Both contenders' rows, relabelled ``champion``/``challenger``, on the (video, condition) pairs both have."""
    picked: dict[str, dict[tuple[str, str], ScoreRow]] = {role: {} for role in ROLES}
    for r in rows:
        if champion.matches(r) and challenger.matches(r):
            raise EvaluationError(f"{champion} and {challenger} select the same rows: pin a version to each")
        for role, who in zip(ROLES, (champion, challenger), strict=True):
            if who.matches(r):
                picked[role][(r.video_id, r.condition)] = r.model_copy(update={"detector": role})
    for role, who in zip(ROLES, (champion, challenger), strict=True):
        if not picked[role]:
            held = ", ".join(sorted({f"{r.detector}@{r.detector_version}" for r in rows})) or "no rows at all"
            raise EvaluationError(f"no rows for {who} in this run (it holds {held})")
        if len(versions := sorted({r.detector_version for r in rows if who.matches(r)})) > 1:
            raise EvaluationError(f"{who} has rows of several versions in this run ({', '.join(versions)}): pin one")
    both = picked["champion"].keys() & picked["challenger"].keys()
    return [picked[role][k] for role in ROLES for k in sorted(both)]


class Prepared:
    """A pair's rows (:func:`shared_rows`) as every comparison of them starts, the paired one here and the reals-only
    one (:func:`gateway.evaluation.reals.compare_reals`): the rows scored (an infrastructure failure is in no
    quantity), the conditions, the anchors, and, computed when first asked for, each role's threshold (its card's,
    or the one giving RealR ``calibrate`` on its ``original`` reals), every decision at it, and the anchor-clustered
    bootstrap draw that serves both roles and every condition."""

    def __init__(self, rows: list[ScoreRow], replicates: int, seed: int, calibrate: float | None) -> None:
        self.rows, self.replicates, self.seed, self.calibrated = rows, replicates, seed, calibrate
        self.scored = [r for r in rows if r.error_kind != "infra"]
        self.conditions = ordered_conditions(rows)
        self.anchors = sorted({r.anchor_id for r in rows if r.anchor_id})

    @functools.cached_property
    def thresholds(self) -> dict[str, float]:
        return decision_thresholds(self.scored, list(ROLES), None, self.calibrated)

    @functools.cached_property
    def decided(self) -> proportions.Decisions:
        """Every video's decision per (role, condition), whether or not its anchor is paired."""
        return proportions.decisions(self.scored, self.thresholds, paired=False)

    @functools.cached_property
    def weights(self) -> np.ndarray:
        return anchor_resamples(self.rows, self.anchors, self.replicates, self.seed)


def compare(
    rows: list[ScoreRow],
    champion: Contender,
    challenger: Contender,
    replicates: int = REPLICATES,
    seed: int = SEED,
    calibrate: float | None = None,
) -> Comparison:
    """Every quantity of the comparison per condition, with 95% intervals. Each contender's decisions are at its
    card's threshold, or at the one giving RealR ``calibrate`` on the shared videos' ``original`` reals."""
    pair = Prepared(shared_rows(rows, champion, challenger), replicates, seed, calibrate)
    return compare_shared(pair, champion, challenger)


def compare_shared(pair: Prepared, champion: Contender, challenger: Contender) -> Comparison:
    """:func:`compare` on what :func:`shared_rows` gave for ``champion`` and ``challenger``."""
    sources = sorted({r.source for r in pair.rows if r.label == "generated" and r.source})
    if not (sources and pair.anchors):
        raise EvaluationError("the shared videos hold no generated videos paired with real anchors")
    thr, conditions = pair.thresholds, pair.conditions
    layout = Layout(sources, pair.anchors, pair.weights)
    keys = [(role, c) for role in ROLES for c in conditions]
    selections = {(role, c): [r for r in pair.scored if r.detector == role and r.condition == c] for role, c in keys}
    computed = {key: layout.cell(*key, sel, thr[key[0]]) for key, sel in selections.items()}
    aucs = _AUCs(layout, selections, computed)
    decided = proportions.decisions(pair.scored, thr), pair.decided
    out = [_contrast(cond, computed, aucs, conditions, *decided) for cond in conditions]
    return Comparison.of(pair, champion, challenger, out)


@dataclass(frozen=True)
class _AUCs:
    """The contenders' AUC differences on the videos that all the AUCs compared scored."""

    layout: Layout
    selections: dict
    computed: dict

    def difference(self, cond: str) -> Estimate:
        """Challenger minus champion under ``cond``, on the videos both scored there."""
        keys = [(role, cond) for role in ROLES]
        (champ, b_champ), (chall, b_chall) = self.layout.aucs_on_same_videos(keys, self.selections, self.computed)
        return float(ab.difference(chall, champ)), percentile_interval(ab.difference(b_chall, b_champ))

    def robustness(self, cond: str) -> Estimate:
        """(challenger's AUC under ``cond`` minus on original) minus the champion's, on the videos all four scored."""
        keys = list(ab.ROBUSTNESS_DIFFERENCE.needs(cond))
        (h, bh), (h0, bh0), (c, bc), (c0, bc0) = self.layout.aucs_on_same_videos(keys, self.selections, self.computed)
        point = ab.robustness_difference((h, h0), (c, c0))
        return float(point), percentile_interval(ab.robustness_difference((bh, bh0), (bc, bc0)))


def _contrast(cond: str, computed: dict, aucs: _AUCs, conditions: list[str], decided: dict, everyone: dict):
    def diff(key: str, score: Estimate) -> Estimate:
        (champ, b_champ), (chall, b_chall) = computed["champion", cond], computed["challenger", cond]
        point = ab.difference(getattr(chall, key), getattr(champ, key))
        # a contender that scored nothing decided nothing: no difference to bound
        if not np.isfinite(point):
            return estimates.NO_PAIRS
        return estimates.widened((float(point), percentile_interval(ab.difference(b_chall[key], b_champ[key]))), score)

    robust = "original" in conditions and ab.ROBUSTNESS_DIFFERENCE.defined_under(cond)
    rob = aucs.robustness(cond) if robust else None
    fake, real = proportions.recall_differences(*(decided.get((role, cond), {}) for role in ("challenger", "champion")))
    disagreement, flips = label_free(everyone, cond, aucs.layout.anchors, aucs.layout.weights)
    n_gen, n_real = computed["champion", cond][0].n_generated, computed["champion", cond][0].n_real
    return ConditionContrast(
        condition=cond,
        auc_difference=aucs.difference(cond),
        robustness_difference=rob,
        fake_recall_difference=diff("fake_recall", fake),
        real_recall_difference=diff("real_recall", real),
        disagreement=disagreement,
        flip_rate_difference=flips,
        videos=n_gen + n_real,
        generated=n_gen,
        real=n_real,
    )


def label_free(
    decided: proportions.Decisions, cond: str, anchors: list[str], weights: np.ndarray
) -> tuple[Estimate, Estimate | None]:
    """The share of the videos both scored under ``cond`` that the two decide differently, and the challenger's
    flip rate minus the champion's on the videos both scored under ``cond`` and ``original`` (a flip: a decision
    under ``cond`` other than on ``original``): over the videos, each interval the hull of the anchor-clustered
    bootstrap's and the score interval's (Wilson's, Newcombe's)."""
    index = {a: i for i, a in enumerate(anchors)}
    n, differ, both, delta = (np.zeros(len(index)) for _ in range(4))
    champ, champ0, chall, chall0 = (decided.get((role, c), {}) for role in ROLES for c in (cond, "original"))
    # per video: flipped (challenger, champion)
    flipped = ([], [])
    for v, h in champ.items():
        c = chall.get(v)
        if c is None or None in (h.flagged, c.flagged):
            continue
        i = index[h.anchor]
        n[i] += 1
        differ[i] += h.flagged != c.flagged
        h0, c0 = champ0.get(v), chall0.get(v)
        if cond != "original" and h0 is not None and c0 is not None and None not in (h0.flagged, c0.flagged):
            both[i] += 1
            flipped[0].append(c.flagged != c0.flagged)
            flipped[1].append(h.flagged != h0.flagged)
            delta[i] += flipped[0][-1] - flipped[1][-1]
    w = weights
    with np.errstate(invalid="ignore", divide="ignore"):
        flips = (
            float(ab.difference(np.mean(flipped[0]), np.mean(flipped[1]))) if both.any() else float("nan"),
            percentile_interval((w @ delta) / (w @ both)),
        )
    disagreement, _ = estimates.clustered_share(differ, n, w)
    return disagreement, estimates.widened(flips, estimates.paired_difference(*flipped)) if both.any() else None


def parse_pairs(pairs: list[str] | tuple[str, ...]) -> list[tuple[Contender, Contender]]:
    """Each ``CHAMPION:CHALLENGER`` as two contenders (:func:`gateway.core.contenders.split_pair`); a malformed
    or repeated one raises :class:`EvaluationError` before any work is done."""
    try:
        sides = [split_pair(pair) for pair in pairs]
        distinct_pairs(sides)
    except PairError as exc:
        raise EvaluationError(str(exc)) from exc
    return [(Contender.parse(champion), Contender.parse(challenger)) for champion, challenger in sides]


def paired_rows(rows: list[ScoreRow], pairs: list[tuple[Contender, Contender]]) -> list[list[ScoreRow]]:
    """Each pair's :func:`~gateway.evaluation.compare.shared_rows` (which raises where a contender has no rows)."""
    return [shared_rows(rows, champion, challenger) for champion, challenger in pairs]


Measured = TypeVar("Measured")


def compare_each(
    measure: Callable[[Prepared, Contender, Contender], Measured],
    shared: list[list[ScoreRow]],
    pairs: list[tuple[Contender, Contender]],
    replicates: int,
    seed: int | None = None,
    calibrate: float | None = None,
) -> list[Measured]:
    """``measure`` (:func:`compare_shared`, or the reals-only comparison) on each (champion, challenger) of ``pairs``
    and its rows of ``shared`` (:func:`paired_rows`); ``seed`` None: :data:`~gateway.evaluation.paired.SEED`."""
    seed = SEED if seed is None else seed
    return [
        measure(Prepared(rows, replicates, seed, calibrate), *pair) for rows, pair in zip(shared, pairs, strict=True)
    ]
