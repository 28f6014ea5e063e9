"""Which videos a condition flipped: per detector and condition, the videos whose verdict under the condition differs
from their verdict on ``original``, ranked by how far the score moved.

A flip is read from two rows of the same video and detector version, both scored: the decision on ``original`` and
the decision under the condition, each ``score >= threshold`` (the rule every decision follows,
:func:`detectors.stats.metrics.decisions`) at its row's threshold, or at the one a report decided at (a
recalibrated one).
``real_to_generated`` flips are videos called real as uploaded and generated once disseminated (on a real video: a
new false positive, e.g. a news badge that looks generated); ``generated_to_real`` the reverse (on a generated
video: one that slips through). Within a direction the flips are ranked by ``|score under the condition - score on
original|``, largest first, ties by video id, so the list is the same on every run of the same rows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

from gateway.core.contenders import Contender, PairError
from gateway.core.messages import ScoreRow
from gateway.evaluation.errors import EvaluationError

ORIGINAL = "original"
Direction = Literal["real_to_generated", "generated_to_real"]
DIRECTIONS: tuple[Direction, ...] = ("real_to_generated", "generated_to_real")


class FlipsError(EvaluationError):
    """A detector or condition that the run has no scored rows of, or a condition that cannot flip (original)."""


@dataclass(frozen=True)
class Flip:
    """One video whose verdict ``condition`` changed for one detector version."""

    video_id: str
    label: str | None
    anchor_id: str | None
    detector: str
    detector_version: str
    condition: str
    direction: Direction
    original_score: float
    variant_score: float
    original_threshold: float
    variant_threshold: float
    original_decision: bool
    variant_decision: bool
    input_sha256: str | None
    variant_sha256: str | None
    spec_hash: str | None

    @property
    def change(self) -> float:
        """Score under the condition minus score on ``original``."""
        return self.variant_score - self.original_score

    @property
    def verdicts(self) -> str:
        """``real -> generated`` or ``generated -> real``: the decision pair, as the rows say."""
        return " -> ".join("generated" if d else "real" for d in (self.original_decision, self.variant_decision))

    def as_json(self) -> dict:
        return asdict(self) | {"change": self.change}


def _scored(row: ScoreRow) -> bool:
    return row.error is None and row.score is not None and row.threshold is not None


def _select(rows: Iterable[ScoreRow], detector: str) -> list[ScoreRow]:
    """The scored rows of ``detector`` (``NAME``, or ``NAME@VERSION`` where the run holds several of its versions:
    a bare name is then refused, not its versions mixed)."""
    try:
        contender = Contender.parse(detector)
    except PairError as exc:
        raise FlipsError(str(exc)) from exc
    name, version = contender.detector, contender.version
    mine = [r for r in rows if contender.matches(r) and _scored(r)]
    versions = sorted({r.detector_version for r in mine})
    if not version and len(versions) > 1:
        named = ", ".join(f"{name}@{v}" for v in versions)
        raise FlipsError(f"the run holds several versions of {name}: name one ({named})")
    return mine


def find_flips(
    rows: Iterable[ScoreRow], detector: str, condition: str, limit: int | None = None, threshold: float | None = None
) -> dict[str, list[Flip]]:
    """The flips of ``detector`` (``NAME`` or ``NAME@VERSION``) under ``condition``, per direction (both keys always
    present), largest score change first, at most ``limit`` each (None: all); decided at ``threshold`` where given,
    else at each row's own.

    Raises :class:`FlipsError` where the run has no scored row of the detector, or none under the condition, or
    the condition is ``original``."""
    if condition == ORIGINAL:
        raise FlipsError("original is what a condition is compared with: name another condition")
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be at least 0, got {limit}")
    mine = _select(rows, detector)
    if not mine:
        raise FlipsError(f"no scored row of detector {detector!r} in this run")
    conditions = sorted({r.condition for r in mine})
    if condition not in conditions:
        raise FlipsError(f"no scored row of {detector} under {condition!r}; its conditions: {', '.join(conditions)}")
    original = {(r.video_id, r.detector_version): r for r in mine if r.condition == ORIGINAL}
    out: dict[str, list[Flip]] = {d: [] for d in DIRECTIONS}

    def at(row: ScoreRow) -> float:
        return float(row.threshold if threshold is None else threshold)

    for r in mine:
        base = original.get((r.video_id, r.detector_version))
        if r.condition != condition or base is None:
            continue
        before, after = bool(base.score >= at(base)), bool(r.score >= at(r))
        if before == after:
            continue
        direction: Direction = "real_to_generated" if after else "generated_to_real"
        out[direction].append(
            Flip(
                video_id=r.video_id,
                label=r.label,
                anchor_id=r.anchor_id,
                detector=r.detector,
                detector_version=r.detector_version,
                condition=condition,
                direction=direction,
                original_score=float(base.score),
                variant_score=float(r.score),
                original_threshold=at(base),
                variant_threshold=at(r),
                original_decision=before,
                variant_decision=after,
                input_sha256=r.input_sha256,
                variant_sha256=r.variant_sha256,
                spec_hash=r.spec_hash,
            )
        )
    for direction, flips in out.items():
        flips.sort(key=lambda f: (-abs(f.change), f.video_id, f.detector_version))
        out[direction] = flips if limit is None else flips[:limit]
    return out


def paired_count(rows: Iterable[ScoreRow], detector: str, condition: str) -> int:
    """How many videos of ``detector`` were scored both on ``original`` and under ``condition`` (a flip rate's
    denominator)."""
    mine = _select(rows, detector)
    on = {(r.video_id, r.detector_version) for r in mine if r.condition == ORIGINAL}
    return sum(1 for r in mine if r.condition == condition and (r.video_id, r.detector_version) in on)
