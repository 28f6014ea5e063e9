"""The monitor's series, computed from a snapshot of the store: labelled metrics with intervals, paired drift
vs ``original`` on the same videos, and label-free paired signals.

Populations: ``traffic`` (every scored video that is not a canary) and ``canary`` for the label-free signals;
``labelled`` (traffic with a known label) and ``canary`` for the labelled metrics. Windows: ``time`` (every
video of the last ``windows.seconds``, by event time) and ``count`` (the latest ``windows.count`` videos of
the series, labelled ones for the labelled metrics). Drift and the label-free signals pair each video's score
under a condition with its score under ``original`` by the same detector version; a series whose latest
sample is older than ``stale_after_s`` is not exported at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from detectors import intervals, metrics
from gateway.monitor.config import WindowSettings
from gateway.monitor.store import Series, Video

FIRST = "lastmile_window_last_sample_timestamp_seconds"
BASE = ("detector", "version", "condition", "window", "population")
FAMILIES: dict[str, tuple[str, tuple[str, ...]]] = {  # name -> (help, label names)
    FIRST: (
        "Event time of the series' latest sample",
        ("detector", "version", "condition", "population"),
    ),
    "lastmile_window_videos": ("Scored videos in the window", BASE),
    "lastmile_window_samples": ("Labelled scores in the window, by true label", (*BASE, "label")),
    "lastmile_paired_videos": ("Videos scored under both this condition and original, in the window", BASE),
    "lastmile_paired_samples": ("Labelled videos scored under both this condition and original", BASE),
    "lastmile_auc": ("Windowed AUC of labelled scores", BASE),
    "lastmile_fake_recall": ("Windowed FakeR (generated videos called generated)", BASE),
    "lastmile_real_recall": ("Windowed RealR (real videos called real)", BASE),
    "lastmile_balanced_accuracy": ("Windowed balanced accuracy, (FakeR + RealR) / 2", BASE),
    "lastmile_auc_drift": ("Windowed AUC minus original's on the same videos", BASE),
    "lastmile_fake_recall_drift": ("Windowed FakeR minus original's on the same videos", BASE),
    "lastmile_real_recall_drift": ("Windowed RealR minus original's on the same videos", BASE),
    "lastmile_flip_rate": (
        "Share of videos whose decision under this condition differs from original's, by original decision",
        (*BASE, "direction"),
    ),
    "lastmile_score_shift_mean": ("Mean of score under this condition minus score under original", BASE),
    "lastmile_score_ks_statistic": ("Two-sample KS distance between this condition's and original's scores", BASE),
}
BOUNDED = ("lastmile_auc", "lastmile_fake_recall", "lastmile_real_recall", "lastmile_auc_drift",
           "lastmile_fake_recall_drift", "lastmile_real_recall_drift")  # fmt: skip
for _name in BOUNDED:  # each gets _lower and _upper series: rules fire on the interval, not on the estimate
    _help, _labels = FAMILIES[_name]
    FAMILIES[f"{_name}_lower"] = (f"Lower bound of the 95% interval: {_help[0].lower()}{_help[1:]}", _labels)
    FAMILIES[f"{_name}_upper"] = (f"Upper bound of the 95% interval: {_help[0].lower()}{_help[1:]}", _labels)


@dataclass(frozen=True)
class Sample:
    name: str
    labels: dict[str, str]
    value: float


@dataclass
class Column:
    """One series' samples in one population, oldest first: video index, event time, score, decision, label."""

    vid: np.ndarray
    t: np.ndarray
    score: np.ndarray
    decision: np.ndarray
    label: np.ndarray  # 1 generated, 0 real, -1 not known


def columns(videos: list[tuple[str, Video]]) -> dict[tuple[Series, str], Column]:
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
        out[key] = Column(
            np.array(vid), np.array(t), np.array(score, float), np.array(decision, bool), np.array(label, np.int8)
        )
    return out


def compute(videos: list[tuple[str, Video]], settings: WindowSettings, now: float) -> list[Sample]:
    """Every exported sample of the monitor's windowed families."""
    cols = columns(videos)
    fresh_after = now - settings.stale_after_s
    out: list[Sample] = []
    for (series, kind), col in cols.items():
        det, ver, cond = series
        base = cols.get(((det, ver, "original"), kind)) if cond != "original" else None
        ident = {"detector": det, "version": ver, "condition": cond}
        if col.t[-1] >= fresh_after:
            out.append(Sample(FIRST, {**ident, "population": kind}, float(col.t.max())))
            for window, sel in _windows(np.arange(len(col.t)), settings.count):
                out += _label_free(col, sel, base, {**ident, "window": window, "population": kind})
        known = np.flatnonzero(col.label >= 0)
        population = "canary" if kind == "canary" else "labelled"
        if known.size and col.t[known].max() >= fresh_after:
            if population != kind:  # a canary series has one timestamp
                out.append(Sample(FIRST, {**ident, "population": population}, float(col.t[known].max())))
            for window, sel in _windows(known, settings.count):
                labels = {**ident, "window": window, "population": population}
                out += _labelled(col, sel, base, labels, settings.confidence)
    return out


def _windows(idx: np.ndarray, count: int) -> Iterator[tuple[str, np.ndarray]]:
    yield "time", idx
    yield "count", idx[-count:]


def _paired(col: Column, sel: np.ndarray, base: Column | None) -> tuple[np.ndarray, np.ndarray]:
    """Positions in ``col`` (within ``sel``) and in ``base`` of the videos scored under both."""
    if base is None:
        return np.empty(0, int), np.empty(0, int)
    _, in_sel, in_base = np.intersect1d(col.vid[sel], base.vid, assume_unique=True, return_indices=True)
    return sel[in_sel], in_base


def _bounded(name: str, labels: dict, interval: tuple[float, float, float]) -> list[Sample]:
    est, lo, hi = interval
    return [Sample(name, labels, est), Sample(f"{name}_lower", labels, lo), Sample(f"{name}_upper", labels, hi)]


def _label_free(col: Column, sel: np.ndarray, base: Column | None, labels: dict) -> list[Sample]:
    out = [Sample("lastmile_window_videos", labels, float(sel.size))]
    if base is None:
        return out
    a, b = _paired(col, sel, base)
    out.append(Sample("lastmile_paired_videos", labels, float(a.size)))
    if not a.size:
        return out
    sa, sb, da, db = col.score[a], base.score[b], col.decision[a], base.decision[b]
    out.append(Sample("lastmile_score_shift_mean", labels, float(np.mean(sa - sb))))
    out.append(Sample("lastmile_score_ks_statistic", labels, intervals.ks_statistic(sa, sb)))
    if (~db).any():
        out.append(Sample("lastmile_flip_rate", {**labels, "direction": "real_to_generated"}, float(da[~db].mean())))
    if db.any():
        out.append(Sample("lastmile_flip_rate", {**labels, "direction": "generated_to_real"}, float((~da[db]).mean())))
    return out


def _labelled(col: Column, sel: np.ndarray, base: Column | None, labels: dict, conf: float) -> list[Sample]:
    y, s, d = col.label[sel] == 1, col.score[sel], col.decision[sel]
    n_gen, n_real = int(y.sum()), int((~y).sum())
    out = [
        Sample("lastmile_window_samples", {**labels, "label": "generated"}, float(n_gen)),
        Sample("lastmile_window_samples", {**labels, "label": "real"}, float(n_real)),
    ]
    if n_gen:
        out += _bounded("lastmile_fake_recall", labels, intervals.wilson_interval(int(d[y].sum()), n_gen, conf))
    if n_real:
        out += _bounded("lastmile_real_recall", labels, intervals.wilson_interval(int((~d[~y]).sum()), n_real, conf))
    if n_gen and n_real:
        fr, rr = d[y].mean(), (~d[~y]).mean()
        out.append(Sample("lastmile_balanced_accuracy", labels, float((fr + rr) / 2)))
        if n_gen >= 2 and n_real >= 2:
            out += _bounded("lastmile_auc", labels, intervals.auc_interval(y, s, conf))
        else:
            out.append(Sample("lastmile_auc", labels, metrics.auc(y, s)))
    if base is not None:
        out += _drift(col, sel, base, labels, conf)
    return out


def _drift(col: Column, sel: np.ndarray, base: Column, labels: dict, conf: float) -> list[Sample]:
    a, b = _paired(col, sel, base)
    y = col.label[a] == 1
    da, db = col.decision[a], base.decision[b]
    out = [Sample("lastmile_paired_samples", labels, float(a.size))]
    if y.sum() >= 2 and (~y).sum() >= 2:
        diff = intervals.paired_auc_difference(y, col.score[a], base.score[b], conf)
        out += _bounded("lastmile_auc_drift", labels, diff)
    if y.any():
        fr = intervals.paired_proportion_difference(da[y], db[y], conf)
        out += _bounded("lastmile_fake_recall_drift", labels, fr)
    if (~y).any():
        rr = intervals.paired_proportion_difference(~da[~y], ~db[~y], conf)
        out += _bounded("lastmile_real_recall_drift", labels, rr)
    return out
