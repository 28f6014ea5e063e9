"""Champion against challenger on the same videos (issue 25): per condition, paired differences.

Only (video, condition) pairs both detectors have a row for count; of those, a pair one detector scored and the
other failed on stays (the failure is that detector's miss in FakeR/RealR and is left out of its AUC, as in
:mod:`gateway.evaluation.paired`), and infrastructure failures are left out of every quantity. Per condition: the
AUC difference (challenger minus champion) and the *robustness difference* (challenger's AUC drift from
``original`` minus the champion's), with the anchor-clustered bootstrap of :mod:`gateway.evaluation.paired` (one
anchor draw serves both detectors and every condition, so each replicate keeps their covariance); the FakeR and
RealR differences at each card's threshold and the difference of their flip rates (the share of videos whose
decision under the condition differs from the decision on ``original``), with Newcombe's paired score interval;
the share of videos on which the two decide differently, with Wilson's (:mod:`gateway.evaluation.proportions`,
as PROTOCOL.md asks for differences of paired proportions).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gateway.core.messages import ScoreRow
from gateway.evaluation import proportions
from gateway.evaluation.bootstrap import anchor_resamples, percentile_interval
from gateway.evaluation.cells import cell_metrics
from gateway.evaluation.errors import EvaluationError
from gateway.evaluation.paired import REPLICATES, SEED
from gateway.evaluation.thresholds import decision_thresholds
from transforms.spec import LASTMILE

ROLES = ("champion", "challenger")
Estimate = proportions.Estimate  # point estimate, 95% interval


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
    pooled_apart: list[str]  # conditions where a pooled ΔFakeR/ΔRealR differs from the source averages' difference

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
    rows: list[ScoreRow], champion: Contender, challenger: Contender, replicates: int = REPLICATES, seed: int = SEED
) -> Comparison:
    """Every quantity of the comparison per condition, with 95% intervals."""
    return compare_shared(shared_rows(rows, champion, challenger), champion, challenger, replicates, seed)


def compare_shared(
    pair: list[ScoreRow], champion: Contender, challenger: Contender, replicates: int = REPLICATES, seed: int = SEED
) -> Comparison:
    """:func:`compare` on what :func:`shared_rows` gave for ``champion`` and ``challenger``."""
    scored = [r for r in pair if r.error_kind != "infra"]
    seen = {r.condition for r in pair}
    conditions = [c.name for c in LASTMILE if c.name in seen] + sorted(seen - {c.name for c in LASTMILE})
    sources = sorted({r.source for r in pair if r.label == "generated" and r.source})
    anchors = sorted({r.anchor_id for r in pair if r.anchor_id})
    if not (sources and anchors):
        raise EvaluationError("the shared videos hold no generated videos paired with real anchors")
    thr = decision_thresholds(scored, list(ROLES), None, None)
    w = anchor_resamples(pair, anchors, replicates, seed)
    weights = dict.fromkeys(sources, w)
    cells, boot = {}, {}
    for role in ROLES:
        for cond in conditions:
            sel = [r for r in scored if r.detector == role and r.condition == cond]
            cells[role, cond], boot[role, cond] = cell_metrics(role, cond, sel, sources, anchors, weights, thr[role])
    decided = proportions.decisions(scored, thr)
    out = [_contrast(cond, cells, boot, conditions, decided) for cond in conditions]
    apart = [c.condition for c in out if _pooled_apart(c, cells)]
    return Comparison(str(champion), str(challenger), thr, out, len(anchors), replicates, seed, apart)


def _pooled_apart(c: ConditionContrast, cells: dict) -> bool:
    return any(
        proportions.pooling_differs(
            getattr(c, f"{key}_difference")[0],
            getattr(cells["challenger", c.condition], key) - getattr(cells["champion", c.condition], key),
        )
        for key in ("fake_recall", "real_recall")
    )


def _contrast(cond: str, cells: dict, boot: dict, conditions: list[str], decided: proportions.Decisions):
    def diff(key: str, c: str = cond) -> Estimate:
        point = getattr(cells["challenger", c], key) - getattr(cells["champion", c], key)
        return float(point), percentile_interval(boot["challenger", c][key] - boot["champion", c][key])

    def auc_gap(c: str) -> np.ndarray:
        return boot["challenger", c]["auc"] - boot["champion", c]["auc"]

    rob = None
    if "original" in conditions and cond != "original":
        rob = (diff("auc")[0] - diff("auc", "original")[0], percentile_interval(auc_gap(cond) - auc_gap("original")))
    champion, challenger = (decided.get((role, cond), {}) for role in ROLES)
    fake, real = proportions.recall_differences(challenger, champion)
    n_gen, n_real = cells["champion", cond].n_generated, cells["champion", cond].n_real
    return ConditionContrast(
        condition=cond,
        auc_difference=diff("auc"),
        robustness_difference=rob,
        fake_recall_difference=fake,
        real_recall_difference=real,
        disagreement=_disagreement(champion, challenger),
        flip_rate_difference=_flip_rate_difference(decided, cond) if cond != "original" else None,
        videos=n_gen + n_real,
        generated=n_gen,
        real=n_real,
    )


def _disagreement(champion: dict, challenger: dict) -> Estimate:
    """The share of the videos both scored that the two decide differently, with Wilson's interval."""
    both = [v for v in champion.keys() & challenger.keys() if None not in (champion[v].flagged, challenger[v].flagged)]
    return proportions.share(sum(champion[v].flagged != challenger[v].flagged for v in both), len(both))


def _flip_rate_difference(decided: proportions.Decisions, cond: str) -> Estimate | None:
    """The challenger's flip rate minus the champion's on the videos both scored under ``cond`` and ``original``
    (a flip: a decision under ``cond`` other than on ``original``), with Newcombe's paired interval."""
    champ, champ0, chall, chall0 = (decided.get((role, c), {}) for role in ROLES for c in (cond, "original"))
    scored = [{v for v, d in side.items() if d.flagged is not None} for side in (champ, champ0, chall, chall0)]
    videos = sorted(set.intersection(*scored))
    if not videos:
        return None
    flips = [[now[v].flagged != then[v].flagged for v in videos] for now, then in ((chall, chall0), (champ, champ0))]
    return proportions.paired_difference(flips[0], flips[1])
