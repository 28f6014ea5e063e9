"""Each detector's decision threshold in an evaluation: fixed once per detector (version), never per condition."""

from __future__ import annotations

import numpy as np

from detectors.stats import metrics
from gateway.core.messages import ScoreRow
from gateway.evaluation.errors import EvaluationError

# a detector that scored nothing: no decision, no operating point
NO_THRESHOLD = float("nan")
# a detector whose rows carry a verdict (a chat detector's binary or diagnostic reply)
VERDICT = float("-inf")
# what a report's glossary says of such a detector's decided metrics
UNDECIDED = (
    "A detector that scored nothing has no threshold and decides nothing: its {metrics} are shown - (null in "
    "report.json), not 0."
)


def decision_thresholds(
    rows: list[ScoreRow], detectors: list[str], override: dict[str, float] | None, target: float | None
) -> dict[str, float]:
    """Per detector, the threshold its scores are decided at: ``override``'s, else recalibrated to RealR
    ``target`` on the run's ``original`` reals (:func:`detectors.stats.metrics.calibrate_threshold`), else the one
    its rows state (its model card's, fixed once, as the protocol asks); :data:`NO_THRESHOLD` for a detector with no
    score at all (it decided nothing: its FakeR, RealR and their drifts are undefined, not 0). Raises
    :class:`EvaluationError` where its scored rows state none, or several, or where it is to be recalibrated but
    has no scored real video on ``original``."""
    out = {}
    for det in detectors:
        if by_verdict(rows, det):
            # its reply's verdict decides: no threshold to override or recalibrate
            out[det] = VERDICT
        elif not any(r.detector == det and r.score is not None for r in rows):
            # no score to decide on, whatever its failed rows state: no threshold is used
            out[det] = NO_THRESHOLD
        elif override and det in override:
            out[det] = override[det]
        elif target is not None:
            reals = [
                r.score
                for r in rows
                if r.detector == det and r.condition == "original" and r.label == "real" and r.score is not None
            ]
            if not reals:
                raise EvaluationError(
                    f"{det}: no real video was scored on original, so its threshold cannot be recalibrated there"
                )
            out[det] = metrics.calibrate_threshold(np.array(reals), target)
        else:
            stated = {r.threshold for r in rows if r.detector == det and r.threshold is not None}
            if len(stated) > 1:
                several = sorted(stated)
                raise EvaluationError(f"{det}: its rows state several thresholds ({several}): its card changed")
            if not stated:
                raise EvaluationError(f"{det}: its scored rows state no threshold (the gateway's carry their card's)")
            out[det] = stated.pop()
    return out


def by_verdict(rows: list[ScoreRow], detector: str) -> bool:
    """Whether ``detector``'s rows are decided by a verdict: a decision that states no threshold."""
    return any(r.detector == detector and r.decision is not None and r.threshold is None for r in rows)


def decided(row: ScoreRow, threshold: float) -> bool | None:
    """A row's decision in an evaluation, the one rule every table follows: the reply's verdict for a detector
    decided by verdict (:data:`VERDICT`), else ``score >= threshold``; None for a row with neither (an error)."""
    if threshold == VERDICT:
        return row.decision if row.error is None else None
    return None if row.score is None else bool(row.score >= threshold)


def has_threshold(threshold: float) -> bool:
    """Whether a detector decided anything: a threshold it scored at, or its verdicts; not :data:`NO_THRESHOLD`."""
    return not bool(np.isnan(threshold))


def threshold_text(threshold: float) -> str:
    """A threshold as a report names it: four significant figures, ``its verdict`` or ``none (nothing scored)``."""
    if threshold == VERDICT:
        return "its verdict"
    return f"{threshold:.4g}" if has_threshold(threshold) else "none (nothing scored)"


def thresholds_sentence(fixed: dict[str, float], calibrated: float | None) -> str:
    """The report's sentence that names each detector's threshold and where it comes from (``calibrated``: the
    RealR they were recalibrated to on original; None: their cards'); a detector that scored nothing used none."""
    named = ", ".join(f"{d} {threshold_text(t)}" for d, t in fixed.items()) or "none"
    origin = (
        "each its model card's"
        if calibrated is None
        else f"each recalibrated on this run's original reals to RealR {100 * calibrated:.1f} %"
    )
    return f"Thresholds, fixed once per detector and held for every condition: {named} ({origin})."
