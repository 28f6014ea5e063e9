"""The hot path, top to bottom: decode -> condition variants -> frame sampling -> detector scores -> rows.

Replay and the Kafka service both call :meth:`Pipeline.process`, so the two cannot drift apart. Errors in a
video become rows with ``error_kind="video"`` (they stay in every denominator); a runtime that cannot answer
becomes ``error_kind="infra"`` rows, counted apart from the detectors' verdicts.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from detectors.errors import BadRequest, RuntimeUnavailable
from detectors.repository import Installed
from detectors.runtimes.base import Runtime
from gateway.core.messages import ScoreRow, VideoItem
from transforms.engine import Engine, EngineResult, Variant
from transforms.errors import VideoError
from transforms.limits import Limits
from transforms.sampling import SamplingPolicy, sample_frames
from transforms.spec import Condition, spec_hash


@dataclass
class Detector:
    """An installed detector and the runtime that scores it."""

    installed: Installed
    runtime: Runtime

    @property
    def card(self):
        return self.installed.card


class Pipeline:
    def __init__(self, engine: Engine, conditions: Sequence[Condition], detectors: Sequence[Detector]) -> None:
        self.engine, self.conditions, self.detectors = engine, tuple(conditions), list(detectors)
        self._model_sha = {d.card.name: d.installed.model_sha256 for d in self.detectors}

    @property
    def limits(self) -> Limits:
        return self.engine.limits

    def process(self, item: VideoItem, conditions: Sequence[Condition] | None = None) -> list[ScoreRow]:
        """Every (condition, detector) row for one video. Never raises for a bad video."""
        conditions = tuple(conditions or self.conditions)
        digest = hashlib.sha256(item.data).hexdigest()
        # 1. decode once, produce every condition variant (the VP9 storage encode is shared)
        t0 = time.perf_counter()
        try:
            result = self.engine.run(item.data, conditions)
        except VideoError as exc:
            return self.error_rows(item, exc, conditions, digest)
        transform_s = time.perf_counter() - t0
        rows: list[ScoreRow] = []
        for condition in conditions:
            variant = result.variants[condition.name]
            # 2. sample frames once per distinct sampling policy
            frames, sample_s, failure = self._sample(variant)
            for det in self.detectors:
                if failure is not None:
                    rows.append(self._error_row(item, condition, det, digest, failure, "video"))
                    continue
                # 3. score
                rows.append(
                    self._score(item, condition, det, result, variant, frames[det.card.sampling], transform_s, sample_s)
                )
        return rows

    def error_rows(
        self,
        item: VideoItem,
        exc: Exception,
        conditions: Sequence[Condition] | None = None,
        digest: str = "",
        kind: str = "video",
    ) -> list[ScoreRow]:
        """One error row per (condition, detector): a failed video stays in every denominator."""
        return [
            self._error_row(item, c, d, digest, exc, kind)
            for c in conditions or self.conditions
            for d in self.detectors
        ]

    def _sample(self, variant: Variant) -> tuple[dict[SamplingPolicy, np.ndarray], float, Exception | None]:
        t0 = time.perf_counter()
        out: dict[SamplingPolicy, np.ndarray] = {}
        try:
            for det in self.detectors:
                policy = det.card.sampling
                if policy not in out:
                    out[policy] = sample_frames(variant.data, policy, self.limits)
        except VideoError as exc:
            return out, time.perf_counter() - t0, exc
        return out, time.perf_counter() - t0, None

    def _score(
        self,
        item: VideoItem,
        condition: Condition,
        det: Detector,
        result: EngineResult,
        variant: Variant,
        frames: np.ndarray,
        transform_s: float,
        sample_s: float,
    ) -> ScoreRow:
        t0 = time.perf_counter()
        try:
            score = float(det.runtime.score(frames[None])[0])
        except BadRequest as exc:
            return self._error_row(item, condition, det, result.input_sha256, exc, "video")
        except RuntimeUnavailable as exc:
            return self._error_row(item, condition, det, result.input_sha256, exc, "infra")
        thr = det.card.threshold.value
        m = variant.meta
        return ScoreRow(
            **self._ids(item, condition, det),
            score=score,
            decision=score >= thr,
            threshold=thr,
            input_sha256=result.input_sha256,
            spec_hash=m.spec_hash,
            profile=m.profile,
            variant_sha256=m.sha256,
            width=m.width,
            height=m.height,
            fps=m.fps,
            frames=m.frames,
            transform_s=round(transform_s, 6),
            variant_s=round(sum(s.seconds / s.shared_by for s in m.steps if s.kind != "normalize"), 6),
            sample_s=round(sample_s, 6),
            infer_s=round(time.perf_counter() - t0, 6),
        )

    def _ids(self, item: VideoItem, condition: Condition, det: Detector) -> dict:
        return dict(
            video_id=item.video_id,
            condition=condition.name,
            detector=det.card.name,
            detector_version=det.card.version,
            runtime=det.runtime.name,
            label=item.label,
            source=item.source,
            anchor_id=item.anchor_id,
            model_sha256=self._model_sha[det.card.name],
        )

    def _error_row(
        self, item: VideoItem, condition: Condition, det: Detector, digest: str, exc: Exception, kind: str
    ) -> ScoreRow:
        return ScoreRow(
            **self._ids(item, condition, det),
            error=str(exc)[:500],
            error_kind=kind,
            error_class=type(exc).__name__,
            input_sha256=digest,
            spec_hash=spec_hash(condition, self.engine.profile),
            profile=self.engine.profile.name,
        )
