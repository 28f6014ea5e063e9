"""Each detector's decision threshold in an evaluation: fixed once per detector (version), never per condition."""

from __future__ import annotations

import numpy as np

from detectors import metrics
from gateway.core.messages import ScoreRow
from gateway.evaluation.errors import EvaluationError


def decision_thresholds(
    rows: list[ScoreRow], detectors: list[str], override: dict[str, float] | None, target: float | None
) -> dict[str, float]:
    """Per detector, the threshold its scores are decided at: ``override``'s, else recalibrated to RealR
    ``target`` on the run's ``original`` reals (:func:`detectors.metrics.calibrate_threshold`), else the one its rows
    state (its model card's, fixed once, as the protocol asks). Raises :class:`EvaluationError` where its scored
    rows state none, or several, or where it is to be recalibrated but has no scored real video on ``original``."""
    out = {}
    for det in detectors:
        scored = any(r.detector == det and r.score is not None for r in rows)
        if override and det in override:
            out[det] = override[det]
        elif target is not None and scored:  # (no score to decide on: no threshold is used)
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
            if not stated and scored:
                raise EvaluationError(f"{det}: its scored rows state no threshold (the gateway's carry their card's)")
            out[det] = stated.pop() if stated else 0.0  # (no score to decide on: no threshold is used)
    return out


def thresholds_sentence(
    fixed: dict[str, float], calibrated: float | None, unscored: frozenset[str] = frozenset()
) -> str:
    """The report's sentence that names each detector's threshold and where it comes from (``calibrated``: the
    RealR they were recalibrated to on original; None: their cards'); an ``unscored`` detector used none."""
    named = ", ".join(f"{d} none (nothing scored)" if d in unscored else f"{d} {t:.4g}" for d, t in fixed.items())
    named = named or "none"
    origin = (
        "each its model card's" if calibrated is None
        else f"each recalibrated on this run's original reals to RealR {100 * calibrated:.1f} %"
    )  # fmt: skip
    return f"Thresholds, fixed once per detector and held for every condition: {named} ({origin})."
