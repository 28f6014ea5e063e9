"""The gateway's operational metrics for Prometheus: counters and histograms observed where results are
published. Nothing here needs a label: every label-dependent and windowed series (AUC, FakeR, RealR, drift,
flip rates) is the monitor's (:mod:`gateway.monitor`), which sees the score events of every gateway replica.

Names follow ``lastmile_<noun>_<unit>[_total]``; labels are limited to detector, version, condition,
decision, outcome, component and stage.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from gateway.core.messages import ScoreRow

SCORE_BUCKETS = (-20, -10, -5, -3, -2, -1, -0.5, -0.25, 0, 0.25, 0.5, 1, 2, 3, 5, 10, 20)
STAGE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
SERIES = ("detector", "version", "condition")


class LiveMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.videos = Counter("lastmile_videos_total", "Videos finished, by outcome", ["outcome"], registry=r)
        self.variants = Counter(
            "lastmile_variants_total", "Condition variants, by outcome", ["condition", "outcome"], registry=r
        )
        self.predictions = Counter(
            "lastmile_predictions_total", "Decisions at the fixed threshold", [*SERIES, "decision"], registry=r
        )
        self.scores = Histogram(
            "lastmile_score",
            "Generated-scores (higher = more likely generated)",
            SERIES,
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
        self.detector_info = Gauge(
            "lastmile_detector_info",
            "1 per detector served: its version, runtime and where it scores (execution provider or server)",
            ["detector", "version", "runtime", "provider"],
            registry=r,
        )

    def observe_detectors(self, detectors: Iterable) -> None:
        """One ``lastmile_detector_info`` series per detector of the pipeline (``pipeline.Detector``)."""
        for d in detectors:
            self.detector_info.labels(d.card.name, d.card.version, d.runtime_name, d.where or "").set(1)

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
            self.scores.labels(*key).observe(row.score)
        by_condition = {}
        for row in rows:
            by_condition.setdefault(row.condition, row.error is None)
        for cond, ok in by_condition.items():
            self.variants.labels(cond, "scored" if ok else "failed").inc()

    def observe_condition_seconds(self, condition: str, seconds: float) -> None:
        self.condition_seconds.labels(condition).observe(seconds)
