"""Champion against challenger on the same videos (issue 25): per condition, paired differences.

Only (video, condition) pairs both detectors have a row for count; of those, a pair one detector scored and the
other failed on stays (the failure is that detector's miss in FakeR/RealR), and infrastructure failures are left out
of every quantity. Per condition: the AUC difference (challenger minus champion, on the videos both scored there)
and the *robustness difference* (challenger's AUC drift from ``original`` minus the champion's, on the videos all
four AUCs scored), with the anchor-clustered bootstrap of :mod:`gateway.evaluation.paired` (one anchor draw serves
both detectors and every condition, so each replicate keeps their covariance); the FakeR and RealR differences at
each contender's threshold (its card's, or recalibrated; sources weighted equally, as the report's cells are), the
difference of their flip rates (the share of videos whose decision under the condition differs from the decision on
``original``) and the share of videos on which the two decide differently, each interval the hull of the same
bootstrap's and a score interval's, Newcombe's or Wilson's (:mod:`gateway.evaluation.proportions` says why).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from detectors.stats import estimates
from detectors.stats.bootstrap import percentile_interval
from gateway.core.messages import ScoreRow
from gateway.evaluation import proportions
from gateway.evaluation.bootstrap import anchor_resamples
from gateway.evaluation.cells import Layout
from gateway.evaluation.errors import EvaluationError
from gateway.evaluation.paired import REPLICATES, SEED, ordered_conditions
from gateway.evaluation.thresholds import decision_thresholds

ROLES = ("champion", "challenger")
Estimate = estimates.Estimate  # point estimate, 95% interval


@dataclass(frozen=True)
class Contender:
    """A detector, optionally pinned to one version: ``npr`` or ``npr@1.1.0``."""

    detector: str
    version: str | None = None

    @classmethod
    def parse(cls, text: str) -> Contender:
        name, _, version = text.strip().partition("@")
        if not name:
            raise EvaluationError(f"a contender is DETECTOR or DETECTOR@VERSION, got {text!r}")
        return cls(name, version or None)

    def matches(self, row: ScoreRow) -> bool:
        return row.detector == self.detector and (self.version is None or row.detector_version == self.version)

    def __str__(self) -> str:
        return self.detector + (f"@{self.version}" if self.version else "")


@dataclass
class ConditionContrast:
    """Challenger minus champion under one condition (robustness and flips: against ``original``)."""

    condition: str
    auc_difference: Estimate
    robustness_difference: Estimate | None  # None on original itself
    fake_recall_difference: Estimate
    real_recall_difference: Estimate
    disagreement: Estimate
    flip_rate_difference: Estimate | None
    videos: int  # scored by both under this condition
    generated: int
    real: int


@dataclass
class Comparison:
    champion: str
    challenger: str
    thresholds: dict[str, float]
    conditions: list[ConditionContrast]
    anchors: int
    replicates: int
    seed: int
    calibrated: float | None = None  # the RealR the thresholds were recalibrated to on original; None: the cards'
    warnings: list[str] = field(default_factory=list)  # what a reader must know first (compare_report's)

    def condition(self, name: str) -> ConditionContrast:
        return next(c for c in self.conditions if c.condition == name)


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
    pair = shared_rows(rows, champion, challenger)
    return compare_shared(pair, champion, challenger, replicates, seed, calibrate)


def compare_shared(
    pair: list[ScoreRow],
    champion: Contender,
    challenger: Contender,
    replicates: int = REPLICATES,
    seed: int = SEED,
    calibrate: float | None = None,
) -> Comparison:
    """:func:`compare` on what :func:`shared_rows` gave for ``champion`` and ``challenger``."""
    scored = [r for r in pair if r.error_kind != "infra"]
    conditions = ordered_conditions(pair)
    sources = sorted({r.source for r in pair if r.label == "generated" and r.source})
    anchors = sorted({r.anchor_id for r in pair if r.anchor_id})
    if not (sources and anchors):
        raise EvaluationError("the shared videos hold no generated videos paired with real anchors")
    thr = decision_thresholds(scored, list(ROLES), None, calibrate)
    layout = Layout(sources, anchors, anchor_resamples(pair, anchors, replicates, seed))
    keys = [(role, c) for role in ROLES for c in conditions]
    selections = {(role, c): [r for r in scored if r.detector == role and r.condition == c] for role, c in keys}
    computed = {key: layout.cell(*key, sel, thr[key[0]]) for key, sel in selections.items()}
    aucs = _AUCs(layout, selections, computed)
    decided = proportions.decisions(scored, thr), proportions.decisions(scored, thr, paired=False)
    out = [_contrast(cond, computed, aucs, conditions, *decided) for cond in conditions]
    return Comparison(str(champion), str(challenger), thr, out, len(anchors), replicates, seed, calibrate)


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
        return float(chall - champ), percentile_interval(b_chall - b_champ)

    def robustness(self, cond: str) -> Estimate:
        """(challenger's AUC under ``cond`` minus on original) minus the champion's, on the videos all four scored."""
        keys = [(role, c) for role in ROLES for c in (cond, "original")]
        (h, bh), (h0, bh0), (c, bc), (c0, bc0) = self.layout.aucs_on_same_videos(keys, self.selections, self.computed)
        return float((c - c0) - (h - h0)), percentile_interval((bc - bc0) - (bh - bh0))


def _contrast(cond: str, computed: dict, aucs: _AUCs, conditions: list[str], decided: dict, everyone: dict):
    def diff(key: str, score: Estimate) -> Estimate:
        (champ, b_champ), (chall, b_chall) = computed["champion", cond], computed["challenger", cond]
        point = getattr(chall, key) - getattr(champ, key)
        if not np.isfinite(point):  # (a contender that scored nothing decided nothing: no difference to bound)
            return estimates.NO_PAIRS
        return estimates.widened((float(point), percentile_interval(b_chall[key] - b_champ[key])), score)

    rob = aucs.robustness(cond) if "original" in conditions and cond != "original" else None
    fake, real = proportions.recall_differences(*(decided.get((role, cond), {}) for role in ("challenger", "champion")))
    disagreement, flips = _label_free(everyone, cond, aucs.layout)
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


def _label_free(decided: proportions.Decisions, cond: str, layout: Layout) -> tuple[Estimate, Estimate | None]:
    """The share of the videos both scored under ``cond`` that the two decide differently, and the challenger's
    flip rate minus the champion's on the videos both scored under ``cond`` and ``original`` (a flip: a decision
    under ``cond`` other than on ``original``): over the videos, each interval the hull of the anchor-clustered
    bootstrap's and the score interval's (Wilson's, Newcombe's)."""
    index = {a: i for i, a in enumerate(layout.anchors)}
    n, differ, both, delta = (np.zeros(len(index)) for _ in range(4))
    champ, champ0, chall, chall0 = (decided.get((role, c), {}) for role in ROLES for c in (cond, "original"))
    flipped = ([], [])  # per video: flipped (challenger, champion)
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
    w = layout.weights
    with np.errstate(invalid="ignore", divide="ignore"):
        flips = (float(np.mean(flipped[0]) - np.mean(flipped[1])) if both.any() else float("nan"),
                 percentile_interval((w @ delta) / (w @ both)))  # fmt: skip
    disagreement, _ = estimates.clustered_share(differ, n, w)
    return disagreement, estimates.widened(flips, estimates.paired_difference(*flipped)) if both.any() else None
