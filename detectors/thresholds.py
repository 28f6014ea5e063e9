"""Which threshold decides a detector's scores, by id: a card's own (:data:`CARD_THRESHOLD`), or one set by
``lastmile detectors calibrate`` (``cal-`` and 12 hex digits of its record). Every score row and event carries the
id, so that decisions made at two thresholds are never counted as one detector's (light: the monitor imports it)."""

from __future__ import annotations

import hashlib

CARD_THRESHOLD = "card"


def calibration_id(record_json: str) -> str:
    """The id of a recalibrated threshold: of its record (the run, its results' sha256, the RealR reached, when)."""
    return "cal-" + hashlib.sha256(record_json.encode()).hexdigest()[:12]
