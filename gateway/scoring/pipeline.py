"""The hot path, top to bottom: decode -> condition variants -> frame sampling -> detector scores -> rows.

Replay and the Kafka service both call :meth:`Pipeline.score` (through :mod:`gateway.scoring.worker`), so the
two cannot drift apart. Each detector scores all of a video's condition variants in one batched call. Errors in a
video become rows with ``error_kind="video"`` (they stay in every denominator); a runtime that cannot answer
becomes ``error_kind="infra"`` rows, counted apart from the detectors' verdicts, and :attr:`Scoring.unavailable`
says so, typed where the :class:`RuntimeUnavailable` is caught. :meth:`Pipeline.error_rows` is the one place
error rows are built, in a worker or in its parent.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from detectors.errors import BadRequest, DetectorError, RuntimeUnavailable, UnparsedReply
from detectors.repository import Installed
from detectors.runtimes.base import Runtime
from detectors.runtimes.chat import Judgement, aspects_text
from gateway.core.messages import MAX_ERROR_CHARS, ScoreRow, VideoItem
from transforms.engine import Engine, EngineResult, Variant
from transforms.errors import VideoError
from transforms.limits import Limits
from transforms.sampling import SamplingPolicy, sample_frames
from transforms.spec import Condition, spec_hash


@dataclass(frozen=True)
class Sampled:
    """One variant's frames per sampling policy, the time it took, and the error that stopped it, if any."""

    frames: dict[SamplingPolicy, np.ndarray]
    seconds: float
    failure: Exception | None


@dataclass(frozen=True)
class Scoring:
    """One video's rows and, when a runtime could not answer (:class:`RuntimeUnavailable`), why: its rows are
    then ``infra`` rows, to run again later, never a verdict."""

    rows: list[ScoreRow]
    unavailable: str | None = None


Outcome = tuple[float | Judgement | DetectorError, float]  # (score, judgement or error; its share of inference s)


def score_batched(runtime: Runtime, frames: Sequence[np.ndarray]) -> list[Outcome]:
    """Score a video's variants with one ``runtime.score`` call per ``runtime.max_batch`` of them.

    A batch refused as a bad request is retried variant by variant, so one bad variant fails one row; a
    runtime that cannot answer fails the batch's rows as infrastructure errors (retried, never a verdict).
    Each variant's inference time is its equal share of its batch's wall time.
    """
    out: list[Outcome] = []
    step = max(1, runtime.max_batch)
    for start in range(0, len(frames), step):
        chunk = frames[start : start + step]
        t0 = time.perf_counter()
        try:
            scores = runtime.score(np.stack(chunk))
        except BadRequest:
            out += [_score_one(runtime, f) for f in chunk]
            continue
        except RuntimeUnavailable as exc:
            share = (time.perf_counter() - t0) / len(chunk)
            out += [(exc, share)] * len(chunk)
            continue
        share = (time.perf_counter() - t0) / len(chunk)
        out += [(float(s), share) for s in scores]
    return out


def judge_all(runtime, frames: Sequence[np.ndarray]) -> list[Outcome]:
    """A chat runtime's judgement of each variant (frames of one video may differ in size by a pixel: they are
    not stacked), each variant's time its equal share of the call's."""
    t0 = time.perf_counter()
    judged = runtime.judge(list(frames))
    share = (time.perf_counter() - t0) / max(len(frames), 1)
    return [(j, share) for j in judged]


def _score_one(runtime: Runtime, frames: np.ndarray) -> Outcome:
    t0 = time.perf_counter()
    try:
        return float(runtime.score(frames[None])[0]), time.perf_counter() - t0
    except (BadRequest, RuntimeUnavailable) as exc:
        return exc, time.perf_counter() - t0


@dataclass
class Detector:
    """An installed detector and the runtime that scores it (``None`` in a process that only writes rows), and
    where it scores: the embedded runtime's execution provider (``CUDAExecutionProvider:0``, or the CPU's, with
    the reason when it fell back), which rows carry as ``runtime_endpoint``, as a remote detector's its server."""

    installed: Installed
    runtime: Runtime | None
    runtime_name: str = ""
    provider: str | None = None

    def __post_init__(self) -> None:
        self.runtime_name = self.runtime.name if self.runtime is not None else self.runtime_name
        self.provider = getattr(self.runtime, "provider", None) or self.provider

    @property
    def where(self) -> str | None:
        """Where it scores, for provenance (``runtime_endpoint``) and the info metric: a remote detector's server,
        else the embedded runtime's execution provider."""
        if self.card.chat:
            return self.card.chat.endpoint
        return self.card.remote.endpoint if self.card.remote else self.provider

    @property
    def card(self):
        return self.installed.card

    @property
    def key(self) -> str:
        """How the run names it: ``NAME``, or ``NAME@VERSION`` for a version beside the detector's default one."""
        return self.installed.key


class Pipeline:
    def __init__(self, engine: Engine, conditions: Sequence[Condition], detectors: Sequence[Detector]) -> None:
        self.engine, self.conditions, self.detectors = engine, tuple(conditions), list(detectors)
        self._model_sha = {d.key: d.installed.model_sha256 for d in self.detectors}

    @property
    def limits(self) -> Limits:
        return self.engine.limits

    def select(self, names: Sequence[str] | None) -> tuple[Condition, ...]:
        """This pipeline's conditions named in ``names`` (in the pipeline's order); all of them for ``None``."""
        if names is None:
            return self.conditions
        wanted = set(names)
        return tuple(c for c in self.conditions if c.name in wanted)

    def scorers(self, names: Sequence[str] | None) -> tuple[Detector, ...]:
        """This pipeline's detectors named in ``names`` (their keys, in the pipeline's order); all for ``None``."""
        if names is None:
            return tuple(self.detectors)
        return tuple(d for d in self.detectors if d.key in set(names))

    def process(self, item: VideoItem, conditions: Sequence[Condition] | None = None) -> list[ScoreRow]:
        """Every (condition, detector) row for one video. Never raises for a bad video."""
        return self.score(item, conditions).rows

    def score(
        self,
        item: VideoItem,
        conditions: Sequence[Condition] | None = None,
        detectors: Sequence[Detector] | None = None,
    ) -> Scoring:
        """Every (condition, detector) row for one video (``detectors``: a subset, e.g. without the shadow
        challengers this video is not sampled for), and whether a runtime was unavailable."""
        conditions, detectors = tuple(conditions or self.conditions), tuple(detectors or self.detectors)
        # 1. decode once, produce every condition variant (the VP9 storage encode is shared)
        t0 = time.perf_counter()
        try:
            result = self.engine.run(item.data, conditions)
        except VideoError as exc:
            digest = hashlib.sha256(item.data).hexdigest()
            return Scoring(self.error_rows(item, exc, conditions, digest, detectors=detectors))
        transform_s = time.perf_counter() - t0
        # 2. sample frames once per (variant, sampling policy)
        sampled = {c.name: self._sample(result.variants[c.name]) for c in conditions}
        # 3. infer: one batched call per detector over all of this video's variants
        rows: dict[tuple[str, str], ScoreRow] = {}
        unavailable: list[str] = []
        for det in detectors:
            rows.update(self._score_variants(item, det, conditions, result, sampled, transform_s, unavailable))
        ordered = [rows[(c.name, d.key)] for c in conditions for d in detectors]
        return Scoring(ordered, unavailable[0] if unavailable else None)

    def error_rows(
        self,
        item: VideoItem,
        exc: Exception,
        conditions: Sequence[Condition] | None = None,
        digest: str | None = None,
        kind: str = "video",
        detectors: Sequence[Detector] | None = None,
    ) -> list[ScoreRow]:
        """One error row per (condition, detector): a failed video stays in every denominator."""
        return [
            self._error_row(item, c, d, digest, exc, kind)
            for c in conditions or self.conditions
            for d in detectors or self.detectors
        ]

    def _sample(self, variant: Variant) -> Sampled:
        t0 = time.perf_counter()
        out: dict[SamplingPolicy, np.ndarray] = {}
        try:
            for det in self.detectors:
                policy = det.card.sampling
                if policy not in out:
                    out[policy] = sample_frames(variant.data, policy, self.limits)
        except VideoError as exc:
            return Sampled(out, time.perf_counter() - t0, exc)
        return Sampled(out, time.perf_counter() - t0, None)

    def _score_variants(
        self,
        item: VideoItem,
        det: Detector,
        conditions: Sequence[Condition],
        result: EngineResult,
        sampled: dict[str, Sampled],
        transform_s: float,
        unavailable: list[str],
    ) -> dict[tuple[str, str], ScoreRow]:
        """One detector over every variant of the video that sampled: a row per condition; the reason of each
        variant its runtime could not score is appended to ``unavailable``."""
        rows = {}
        ready = []
        for c in conditions:
            failure = sampled[c.name].failure
            if failure is not None:
                rows[(c.name, det.key)] = self._error_row(item, c, det, result.input_sha256, failure, "video")
            else:
                ready.append(c)
        frames = [sampled[c.name].frames[det.card.sampling] for c in ready]
        judged = hasattr(det.runtime, "judge")
        outcomes = judge_all(det.runtime, frames) if judged else score_batched(det.runtime, frames)
        for c, (outcome, infer_s) in zip(ready, outcomes, strict=True):
            key = (c.name, det.key)
            if isinstance(outcome, RuntimeUnavailable):
                unavailable.append(str(outcome) or type(outcome).__name__)
                rows[key] = self._error_row(item, c, det, result.input_sha256, outcome, "infra")
            elif isinstance(outcome, UnparsedReply):
                rows[key] = self._error_row(item, c, det, result.input_sha256, outcome, "reply")
            elif isinstance(outcome, Exception):
                rows[key] = self._error_row(item, c, det, result.input_sha256, outcome, "video")
            else:
                variant = result.variants[c.name]
                rows[key] = self._row(item, c, det, result, variant, outcome, transform_s, sampled[c.name], infer_s)
        return rows

    def _row(
        self,
        item: VideoItem,
        condition: Condition,
        det: Detector,
        result: EngineResult,
        variant: Variant,
        outcome: float | Judgement,
        transform_s: float,
        sampled: Sampled,
        infer_s: float,
    ) -> ScoreRow:
        m = variant.meta
        if isinstance(outcome, Judgement):
            j = outcome
            said = dict(score=j.score, decision=j.decision, threshold=j.threshold, aspects=aspects_text(j.aspects))
            said |= dict(tokens_in=j.tokens_in, tokens_out=j.tokens_out, cached=j.cached)
        else:
            thr = det.card.threshold.value
            said = dict(score=outcome, decision=outcome >= thr, threshold=thr)
        return ScoreRow(
            **self._ids(item, condition, det),
            **said,
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
            sample_s=round(sampled.seconds, 6),
            infer_s=round(infer_s, 6),
        )

    def _ids(self, item: VideoItem, condition: Condition, det: Detector) -> dict:
        return dict(
            video_id=item.video_id,
            condition=condition.name,
            detector=det.card.name,
            detector_version=det.card.version,
            threshold_id=det.card.threshold.id,  # (error rows too: one idempotency key per video, condition, detector)
            runtime=det.runtime_name,
            runtime_endpoint=det.where,
            label=item.label,
            source=item.source,
            anchor_id=item.anchor_id,
            event_time=item.event_time,
            canary=item.canary,
            model_sha256=self._model_sha[det.key],
        )

    def _error_row(
        self, item: VideoItem, condition: Condition, det: Detector, digest: str | None, exc: Exception, kind: str
    ) -> ScoreRow:
        paid = {k: getattr(exc, k) for k in ("tokens_in", "tokens_out", "cached")} if kind == "reply" else {}
        return ScoreRow(
            **self._ids(item, condition, det),
            **paid,
            error=str(exc)[:MAX_ERROR_CHARS],
            error_kind=kind,
            error_class=type(exc).__name__,
            input_sha256=digest,
            spec_hash=spec_hash(condition, self.engine.profile),
            profile=self.engine.profile.name,
        )
