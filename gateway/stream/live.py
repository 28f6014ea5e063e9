"""Live metrics for Prometheus: counters and histograms observed where results are published, and windowed
AUC / FakeR / RealR / BAcc (and their drift from ``original`` on the same videos) computed at scrape time
with the same functions as the offline report (:mod:`gateway.metrics`).

Names follow ``lastmile_<noun>_<unit>[_total]``; labels are limited to detector, version, condition, label,
decision, outcome, window and stage.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

from detectors import metrics
from gateway.core.config import WindowSettings
from gateway.core.messages import ScoreRow

SCORE_BUCKETS = (-20, -10, -5, -3, -2, -1, -0.5, -0.25, 0, 0.25, 0.5, 1, 2, 3, 5, 10, 20)
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
SERIES = ("detector", "version", "condition")


@dataclass(frozen=True)
class Entry:
    t: float
    video_id: str
    label: str
    score: float
    decision: bool


class Windows:
    """Labelled scores per (detector, version, condition): a count window and a time window; thread-safe."""

    def __init__(self, settings: WindowSettings, clock: Callable[[], float] = time.time) -> None:
        self.settings, self.clock = settings, clock
        self.count: dict[tuple, deque[Entry]] = {}
        self.time: dict[tuple, deque[Entry]] = {}
        self.lock = threading.Lock()

    def add(self, key: tuple, entry: Entry) -> None:
        with self.lock:
            self.count.setdefault(key, deque(maxlen=self.settings.count)).append(entry)
            window = self.time.setdefault(key, deque(maxlen=max(self.settings.count * 50, 10_000)))
            window.append(entry)

    def snapshot(self) -> dict[str, dict[tuple, list[Entry]]]:
        horizon = self.clock() - self.settings.seconds
        with self.lock:
            for q in self.time.values():
                while q and q[0].t < horizon:
                    q.popleft()
            return {
                "count": {k: list(v) for k, v in self.count.items()},
                "time": {k: list(v) for k, v in self.time.items()},
            }


class LabelJoin:
    """Delayed ground truth: labels by video_id, and scores waiting for theirs; both bounded and TTL'd."""

    def __init__(self, settings: WindowSettings, clock: Callable[[], float] = time.time) -> None:
        self.settings, self.clock = settings, clock
        self.labels: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self.pending: OrderedDict[str, list[tuple[tuple, Entry]]] = OrderedDict()
        self.pending_size = 0
        self.expired = 0

    def label_of(self, video_id: str) -> str | None:
        self._expire()
        hit = self.labels.get(video_id)
        return hit[0] if hit else None

    def add_label(self, video_id: str, label: str) -> list[tuple[tuple, Entry]]:
        """Store a label; return the pending scores it resolves."""
        self._expire()
        self.labels[video_id] = (label, self.clock())
        self.labels.move_to_end(video_id)
        while len(self.labels) > self.settings.max_pending:
            self.labels.popitem(last=False)
        waiting = self.pending.pop(video_id, [])
        self.pending_size -= len(waiting)
        return [(k, Entry(e.t, e.video_id, label, e.score, e.decision)) for k, e in waiting]

    def wait(self, key: tuple, entry: Entry) -> None:
        self._expire()
        self.pending.setdefault(entry.video_id, []).append((key, entry))
        self.pending_size += 1
        while self.pending_size > self.settings.max_pending and self.pending:
            _, dropped = self.pending.popitem(last=False)
            self.pending_size -= len(dropped)
            self.expired += len(dropped)

    def _expire(self) -> None:
        horizon = self.clock() - self.settings.label_ttl_s
        while self.labels and next(iter(self.labels.values()))[1] < horizon:
            self.labels.popitem(last=False)
        while self.pending:
            _vid, entries = next(iter(self.pending.items()))
            if entries[0][1].t >= horizon:
                break
            self.pending.popitem(last=False)
            self.pending_size -= len(entries)
            self.expired += len(entries)


def window_metrics(entries: list[Entry]) -> dict[str, float]:
    """AUC, FakeR, RealR and BAcc of one window (pooled over sources; nan where a class is missing)."""
    if not entries:
        return {}
    y = np.array([e.label == "generated" for e in entries])
    s = np.array([e.score for e in entries])
    c = metrics.Confusion.from_predictions(y, np.array([e.decision for e in entries]))
    return {
        "auc": metrics.auc(y, s),
        "fake_recall": c.fake_recall,
        "real_recall": c.real_recall,
        "balanced_accuracy": c.balanced_accuracy,
    }


class LiveMetrics:
    def __init__(
        self,
        settings: WindowSettings,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.videos = Counter("lastmile_videos_total", "Videos finished, by outcome", ["outcome"], registry=r)
        self.variants = Counter(
            "lastmile_variants_total", "Condition variants, by outcome", ["condition", "outcome"], registry=r
        )
        self.predictions = Counter(
            "lastmile_predictions_total", "Decisions at the fixed threshold", [*SERIES, "decision"], registry=r
        )
        self.labelled = Counter(
            "lastmile_labelled_predictions_total",
            "Decisions whose true label is known",
            [*SERIES, "label", "decision"],
            registry=r,
        )
        self.scores = Histogram(
            "lastmile_score",
            "Generated-scores (higher = more likely generated)",
            [*SERIES, "label"],
            buckets=SCORE_BUCKETS,
            registry=r,
        )
        self.stage = Histogram(
            "lastmile_stage_seconds", "Time per pipeline stage", ["stage"], buckets=STAGE_BUCKETS, registry=r
        )
        self.condition_seconds = Histogram(
            "lastmile_condition_seconds",
            "Encode time of each condition's own steps",
            ["condition"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.dead_letters = Counter(
            "lastmile_dead_letters_total", "Messages sent to the DLQ, by error class", ["outcome"], registry=r
        )
        self.retries = Counter("lastmile_retries_total", "Videos retried because a runtime was unavailable", registry=r)
        self.errors = Counter(
            "lastmile_errors_total", "Failed (video, condition, detector) rows, by kind", ["outcome"], registry=r
        )
        self.lag = Gauge("lastmile_consumer_lag_messages", "Messages behind the input topic's end", registry=r)
        self.in_flight = Gauge("lastmile_in_flight_videos", "Videos in the worker pool", registry=r)
        self.labels_joined = Counter("lastmile_labels_total", "Label events, by outcome", ["outcome"], registry=r)
        self.windows = Windows(settings, clock)
        self.join = LabelJoin(settings, clock)
        self.clock = clock
        r.register(_WindowCollector(self.windows))

    def observe_rows(self, rows: Iterable[ScoreRow], publish_s: float) -> None:
        rows = list(rows)
        self.stage.labels("publish").observe(publish_s)
        seen_transform = False
        for row in rows:
            if row.error:
                self.errors.labels(row.error_kind or "video").inc()
                continue
            if not seen_transform and row.transform_s is not None:
                self.stage.labels("transform").observe(row.transform_s)
                seen_transform = True
            self.stage.labels("sample").observe(row.sample_s or 0.0)
            self.stage.labels("inference").observe(row.infer_s or 0.0)
            key = (row.detector, row.detector_version, row.condition)
            decision = "generated" if row.decision else "real"
            self.predictions.labels(*key, decision).inc()
            label = row.label or self.join.label_of(row.video_id)
            self.scores.labels(*key, label or "unknown").observe(row.score)
            entry = Entry(self.clock(), row.video_id, label or "", row.score, bool(row.decision))
            if label:
                self._resolved(key, entry)
            else:
                self.join.wait(key, entry)
        by_condition = {}
        for row in rows:
            by_condition.setdefault(row.condition, row.error is None)
        for cond, ok in by_condition.items():
            self.variants.labels(cond, "scored" if ok else "failed").inc()

    def observe_condition_seconds(self, condition: str, seconds: float) -> None:
        self.condition_seconds.labels(condition).observe(seconds)

    def observe_label(self, video_id: str, label: str) -> None:
        resolved = self.join.add_label(video_id, label)
        self.labels_joined.labels("joined" if resolved else "stored").inc()
        for key, entry in resolved:
            self.scores.labels(*key, label).observe(entry.score)
            self._resolved(key, entry)

    def _resolved(self, key: tuple, entry: Entry) -> None:
        self.labelled.labels(*key, entry.label, "generated" if entry.decision else "real").inc()
        self.windows.add(key, entry)


WINDOW_GAUGES = {  # metric name -> help; the first four come from window_metrics()
    "auc": ("lastmile_auc", "Windowed AUC of labelled scores"),
    "fake_recall": ("lastmile_fake_recall", "Windowed FakeR of labelled scores"),
    "real_recall": ("lastmile_real_recall", "Windowed RealR of labelled scores"),
    "balanced_accuracy": ("lastmile_balanced_accuracy", "Windowed balanced accuracy of labelled scores"),
    "samples": ("lastmile_window_samples", "Labelled scores in the window"),
    "auc_drift": ("lastmile_auc_drift", "Windowed AUC minus original's, on the same videos"),
    "fake_recall_drift": ("lastmile_fake_recall_drift", "Windowed FakeR minus original's, on the same videos"),
}


class _WindowCollector:
    """Computes the windowed gauges at scrape time from the windows' contents."""

    def __init__(self, windows: Windows) -> None:
        self.windows = windows

    @staticmethod
    def _families() -> dict[str, GaugeMetricFamily]:
        labels = [*SERIES, "window"]
        return {k: GaugeMetricFamily(name, text, labels=labels) for k, (name, text) in WINDOW_GAUGES.items()}

    def describe(self) -> list[GaugeMetricFamily]:
        """The families :meth:`collect` yields (without samples), so the registry can refuse a name clash."""
        return list(self._families().values())

    def collect(self):
        fams = self._families()
        samples, auc_drift, fr_drift = fams.pop("samples"), fams.pop("auc_drift"), fams.pop("fake_recall_drift")
        for window, series in self.windows.snapshot().items():
            for key, entries in series.items():
                values = window_metrics(entries)
                lv = [*key, window]
                samples.add_metric(lv, len(entries))
                for k, fam in fams.items():
                    if k in values and np.isfinite(values[k]):
                        fam.add_metric(lv, values[k])
                base = series.get((key[0], key[1], "original"))
                if key[2] != "original" and base:
                    drift = paired_drift(entries, base)
                    if drift is not None:
                        if np.isfinite(drift["auc"]):
                            auc_drift.add_metric(lv, drift["auc"])
                        if np.isfinite(drift["fake_recall"]):
                            fr_drift.add_metric(lv, drift["fake_recall"])
        yield from fams.values()
        yield from (samples, auc_drift, fr_drift)


def paired_drift(condition: list[Entry], original: list[Entry]) -> dict[str, float] | None:
    """metric(condition) - metric(original) on the videos present in both windows."""
    cond = {e.video_id: e for e in condition}
    orig = {e.video_id: e for e in original}
    common = sorted(cond.keys() & orig.keys())
    if len(common) < 2:
        return None
    a, b = window_metrics([cond[v] for v in common]), window_metrics([orig[v] for v in common])
    return {"auc": a["auc"] - b["auc"], "fake_recall": a["fake_recall"] - b["fake_recall"]}
