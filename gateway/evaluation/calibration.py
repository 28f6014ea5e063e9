"""Thresholds recalibrated on a run's real videos, for ``lastmile detectors calibrate``: what the report's
``--calibrate`` shows for one report, written into the detector's card so that the tap, the monitor and the replay
decide with it.

For each detector, the threshold is :func:`detectors.stats.metrics.calibrate_threshold` of its scores on the run's real
videos under ``original`` (the smallest threshold whose RealR there reaches the target; PROTOCOL.md fixes a
threshold once, on ``original``, and holds it for every condition). The RealR it reaches on those videos is
k/n >= target, given with its Wilson 95% interval (:func:`detectors.stats.intervals.wilson_interval`): the range a
replay of other real videos like them would be expected to fall in, not a promise about different traffic."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from detectors.stats import intervals, metrics
from gateway.core.messages import ScoreRow
from gateway.evaluation.errors import EvaluationError
from gateway.evaluation.thresholds import by_verdict

# a threshold needs one real score; the interval says how little a few of them tell
MIN_REALS = 1
# the widest Wilson 95% interval of the RealR reached that `lastmile detectors calibrate` writes a threshold on without
# --force: +-10 points, so that a card's RealR says something about the next real videos like these
MAX_INTERVAL_WIDTH = 0.20


def reals_needed(target: float, width: float = MAX_INTERVAL_WIDTH, horizon: int = 200) -> int:
    """The fewest real videos from which on every count's RealR at ``target`` (ceil(target * n) kept) has a Wilson
    95% interval at most ``width`` wide (the width is not monotonic in n: checked ``horizon`` counts further)."""

    def fits(n: int) -> bool:
        _, lo, hi = intervals.wilson_interval(int(np.ceil(target * n)), n)
        return hi - lo <= width

    n = 1
    while not all(fits(m) for m in range(n, n + horizon)):
        n += 1
    return n


@dataclass(frozen=True)
class Calibrated:
    """One detector's recalibrated threshold, and what it rests on (:attr:`too_few`: why it says too little to be
    written without ``--force``; None where it says enough)."""

    detector: str
    version: str
    model_sha256: str | None
    threshold: float
    previous: float
    reals: int
    real_recall: float
    interval: tuple[float, float]
    target: float = 0.95

    @property
    def too_few(self) -> str | None:
        width = self.interval[1] - self.interval[0]
        if width <= MAX_INTERVAL_WIDTH:
            return None
        return (
            f"{self.detector}: {self.reals} real videos give RealR {self.real_recall:.3f} with a Wilson 95% interval "
            f"[{self.interval[0]:.3f}, {self.interval[1]:.3f}], {100 * width:.0f} points wide; a threshold is written "
            f"where it is at most {100 * MAX_INTERVAL_WIDTH:.0f} points wide (about {reals_needed(self.target)} real "
            "videos at this target): replay more of your real videos, or pass --force"
        )


def calibrate_run(rows: list[ScoreRow], target: float, detectors: list[str] | None = None) -> list[Calibrated]:
    """Per detector of ``rows`` (or of ``detectors``, in that order), the threshold giving RealR ``target`` on its
    scored real videos under ``original``. Raises :class:`EvaluationError` for a detector the run did not score
    on a real video there, one whose rows hold several versions or models, or a target outside (0, 1)."""
    if not 0 < target < 1:
        raise EvaluationError(f"the RealR to calibrate to must lie in (0, 1); got {target}")
    names = detectors or sorted({r.detector for r in rows})
    out = []
    for det in names:
        mine = [r for r in rows if r.detector == det]
        if not mine:
            raise EvaluationError(
                f"{det}: the run holds no row of this detector (it holds {sorted({r.detector for r in rows})})"
            )
        if by_verdict(mine, det):
            raise EvaluationError(
                f"{det}: its reply's verdict decides (a chat detector's binary or diagnostic prompt), not a threshold: "
                "nothing to calibrate (a rating prompt has a threshold)"
            )
        versions = {(r.detector_version, r.model_sha256) for r in mine if r.score is not None}
        if len(versions) > 1:
            raise EvaluationError(
                f"{det}: the run scored several versions or models of it ({sorted(map(str, versions))})"
            )
        reals = np.array(
            [r.score for r in mine if r.condition == "original" and r.label == "real" and r.score is not None]
        )
        if reals.size < MIN_REALS:
            raise EvaluationError(f"{det}: no real video was scored on original in this run: nothing to calibrate on")
        threshold = metrics.calibrate_threshold(reals, target)
        # called real: score below the threshold
        kept = int(np.count_nonzero(reals < threshold))
        _, lo, hi = intervals.wilson_interval(kept, int(reals.size))
        ((version, sha),) = versions
        stated = {r.threshold for r in mine if r.threshold is not None}
        previous = stated.pop() if len(stated) == 1 else float("nan")
        out.append(
            Calibrated(det, version, sha, threshold, previous, int(reals.size), kept / reals.size, (lo, hi), target)
        )
    return out
