"""Champion against challenger on the same videos (issue 25): per condition, paired differences.

Only (video, condition) pairs both detectors have a row for count; of those, a pair one detector scored and the
other failed on stays (the failure is that detector's miss in FakeR/RealR), and infrastructure failures are left
out of every quantity. Per condition: the AUC difference (challenger minus champion, on the videos both scored
there) and the *robustness difference* (challenger's AUC drift from ``original`` minus the champion's, on the
videos all four AUCs scored), with the anchor-clustered bootstrap of :mod:`gateway.evaluation.paired` (one
anchor draw serves both detectors and every condition, so each replicate keeps their covariance); the FakeR and
RealR differences at each card's threshold and the difference of their flip rates (the share of videos whose
decision under the condition differs from the decision on ``original``), with Newcombe's paired score interval;
the share of videos on which the two decide differently, with Wilson's (:mod:`gateway.evaluation.proportions`,
as PROTOCOL.md asks for differences of paired proportions).
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.messages import ScoreRow
from gateway.evaluation import proportions
from gateway.evaluation.bootstrap import anchor_resamples, percentile_interval
from gateway.evaluation.cells import Layout
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
    layout = Layout(sources, anchors, anchor_resamples(pair, anchors, replicates, seed))
    keys = [(role, c) for role in ROLES for c in conditions]
    selections = {(role, c): [r for r in scored if r.detector == role and r.condition == c] for role, c in keys}
    computed = {key: layout.cell(*key, sel, thr[key[0]]) for key, sel in selections.items()}
    aucs = _AUCs(layout, selections, computed)
    decided = proportions.decisions(scored, thr)
    out = [_contrast(cond, computed, aucs, conditions, decided) for cond in conditions]
    apart = [c.condition for c in out if _pooled_apart(c, {key: cell for key, (cell, _) in computed.items()})]
    return Comparison(str(champion), str(challenger), thr, out, len(anchors), replicates, seed, apart)


def _pooled_apart(c: ConditionContrast, cells: dict) -> bool:
    return any(
        proportions.pooling_differs(
            getattr(c, f"{key}_difference")[0],
            getattr(cells["challenger", c.condition], key) - getattr(cells["champion", c.condition], key),
        )
        for key in ("fake_recall", "real_recall")
    )


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


def _contrast(cond: str, computed: dict, aucs: _AUCs, conditions: list[str], decided: proportions.Decisions):
    rob = aucs.robustness(cond) if "original" in conditions and cond != "original" else None
    champion, challenger = (decided.get((role, cond), {}) for role in ROLES)
    fake, real = proportions.recall_differences(challenger, champion)
    n_gen, n_real = computed["champion", cond][0].n_generated, computed["champion", cond][0].n_real
    return ConditionContrast(
        condition=cond,
        auc_difference=aucs.difference(cond),
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
