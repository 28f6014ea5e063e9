"""Live metrics for Prometheus: counters and histograms observed where results are published, and windowed
AUC / FakeR / RealR / BAcc (and their drift from ``original`` on the same videos) computed at scrape time
with the same functions as the offline report (:mod:`gateway.metrics`).

Names follow ``lastmile_<noun>_<unit>[_total]``; labels are limited to detector, version, condition, label,
decision, outcome, window and stage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

from detectors import metrics
from gateway.core.config import WindowSettings
from gateway.core.messages import LabelEvent, ScoreRow
from gateway.stream.windows import Entry, LabelJoin, Windows

SCORE_BUCKETS = (-20, -10, -5, -3, -2, -1, -0.5, -0.25, 0, 0.25, 0.5, 1, 2, 3, 5, 10, 20)
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
SERIES = ("detector", "version", "condition")


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
        self.retries = Counter(
            "lastmile_retries_total", "Videos run again: the scorer was unavailable or their worker failed", registry=r
        )
        self.errors = Counter(
            "lastmile_errors_total", "Failed (video, condition, detector) rows, by kind", ["outcome"], registry=r
        )
        self.runtime_up = Gauge(
            "lastmile_runtime_up", "1 while the component answers, 0 while it is unavailable", ["component"], registry=r
        )
        self.worker_failures = Counter(
            "lastmile_worker_failures_total",
            "Workers that died or overran on a video, by class",
            ["outcome"],
            registry=r,
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

    def observe_label_message(self, value: bytes) -> None:
        """A message of the labels topic; an invalid one is counted, never fatal."""
        try:
            event = LabelEvent.model_validate_json(value)
        except ValueError:
            self.labels_joined.labels("invalid").inc()
            return
        self.observe_label(event.video_id, event.label)

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
