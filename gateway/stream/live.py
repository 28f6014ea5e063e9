"""The gateway's operational metrics for Prometheus: counters and histograms observed where results are
published. Nothing here needs a label: every label-dependent and windowed series (AUC, FakeR, RealR, drift,
flip rates) is the monitor's (:mod:`gateway.monitor`), which sees the score events of every gateway replica.

Names, help, labels and buckets are the catalogue's (:mod:`gateway.core.catalogue`).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry

from gateway.core import catalogue as mc
from gateway.core.messages import ScoreRow


class LiveMetrics:
    """A gateway's series (:data:`~gateway.core.catalogue.Exporter.GATEWAY`), built from the catalogue."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = r = registry or CollectorRegistry()
        self.videos = mc.instrument(mc.VIDEOS, r)
        self.variants = mc.instrument(mc.VARIANTS, r)
        self.predictions = mc.instrument(mc.PREDICTIONS, r)
        self.scores = mc.instrument(mc.SCORE, r)
        self.stage = mc.instrument(mc.STAGE_SECONDS, r)
        self.condition_seconds = mc.instrument(mc.CONDITION_SECONDS, r)
        self.dead_letters = mc.instrument(mc.DEAD_LETTERS, r)
        self.retries = mc.instrument(mc.RETRIES, r)
        self.errors = mc.instrument(mc.ERRORS, r)
        self.runtime_up = mc.instrument(mc.RUNTIME_UP, r)
        self.worker_failures = mc.instrument(mc.WORKER_FAILURES, r)
        self.lag = mc.instrument(mc.CONSUMER_LAG, r)
        self.in_flight = mc.instrument(mc.IN_FLIGHT, r)
        self.stalled = mc.instrument(mc.STALLED, r)
        self.detector_info = mc.instrument(mc.DETECTOR_INFO, r)
        self.chat_replies = mc.instrument(mc.CHAT_REPLIES, r)
        self.chat_prompt_tokens = mc.instrument(mc.CHAT_PROMPT_TOKENS, r)
        self.chat_completion_tokens = mc.instrument(mc.CHAT_COMPLETION_TOKENS, r)

    def observe_detectors(self, detectors: Iterable) -> None:
        """One ``DETECTOR_INFO`` series per detector of the pipeline (``pipeline.Detector``)."""
        for d in detectors:
            self.detector_info.labels(d.card.name, d.card.version, d.runtime_name, d.where or "").set(1)

    def observe_rows(self, rows: Iterable[ScoreRow], publish_s: float) -> None:
        rows = list(rows)
        self.stage.labels("publish").observe(publish_s)
        seen_transform = False
        for row in rows:
            self._observe_reply(row)
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
            if row.score is not None:  # (a chat detector's verdict may come without one)
                self.scores.labels(*key).observe(row.score)
        by_condition = {}
        for row in rows:
            by_condition.setdefault(row.condition, row.error is None)
        for cond, ok in by_condition.items():
            self.variants.labels(cond, "scored" if ok else "failed").inc()

    def _observe_reply(self, row: ScoreRow) -> None:
        """A chat reply's outcome, and its tokens where they were paid for (not read from the cache)."""
        if row.runtime != "chat" or (row.error is not None and row.error_kind != "reply"):
            return
        outcome = "unparsed" if row.error_kind == "reply" else "parsed"
        self.chat_replies.labels(row.detector, row.detector_version, row.condition, outcome).inc()
        if row.cached is not True:
            self.chat_prompt_tokens.labels(row.detector, row.detector_version).inc(row.tokens_in or 0)
            self.chat_completion_tokens.labels(row.detector, row.detector_version).inc(row.tokens_out or 0)

    def observe_condition_seconds(self, condition: str, seconds: float) -> None:
        self.condition_seconds.labels(condition).observe(seconds)
