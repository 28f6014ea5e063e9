"""The monitor's columns built from scratch, from a store's snapshot: the reference that
:class:`gateway.monitor.signals.FrameColumns` (built from the store's frame) is held to."""

from __future__ import annotations

import numpy as np

from gateway.monitor import signals
from gateway.monitor.config import WindowSettings
from gateway.monitor.store import Series, Video
from gateway.monitor.table import Frame


def columns(videos: list[tuple[str, Video]]) -> dict[tuple[Series, str], signals.Column]:
    """Per (series, traffic|canary): its samples, in the snapshot's (event time) order."""
    raw: dict[tuple[Series, str], list[tuple]] = {}
    for i, (_vid, v) in enumerate(videos):
        kind = "canary" if v.canary else "traffic"
        y = -1 if v.label is None else int(v.label == "generated")
        for series, (score, decision) in v.scores.items():
            raw.setdefault((series, kind), []).append((i, v.event_time, score, decision, y))
    out = {}
    for key, rows in raw.items():
        vid, t, score, decision, label = zip(*rows, strict=True)
        out[key] = signals.Column(
            np.array(vid), np.array(t), np.array(score, float), np.array(decision, bool), np.array(label, np.int8)
        )
    return out


def compute(source: list[tuple[str, Video]] | Frame, settings: WindowSettings, now: float) -> list[signals.Sample]:
    """Every exported sample of the windowed families: from a snapshot's videos (this reference's columns) or from a
    store's frame (the monitor's own, :func:`gateway.monitor.signals.compute`)."""
    if isinstance(source, list):
        return signals.samples(columns(source), settings, now)
    return signals.compute(source, settings, now)
