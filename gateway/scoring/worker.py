"""The one worker entry point that the replay and the Kafka service both run in their worker processes.

A process pool calls :func:`init` once per worker (it builds the pipeline from the settings and keeps the
fetch rules), then :func:`run` once per video. :func:`handle` is the same logic without the process
globals: fetch the bytes if the video comes by reference (a fetch failure is this video's error rows), then
run the pipeline. Every failure of a video becomes rows; nothing a video does raises out of here. The
:class:`Answer` says, typed where the exception was caught, when the rows are no verdict (``fault``): a runtime
was ``unavailable``, or something ``unexpected`` happened. What becomes of the video is decided in the parent,
by :mod:`gateway.scoring.supervisor`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from detectors.manifest import Sha256
from gateway.core.config import PipelineSettings, SourceSettings
from gateway.core.messages import ScoreRow, VideoFacts, VideoItem
from gateway.core.sources import ContentMismatch, SourceUnavailable, check_digest, fetch
from gateway.scoring.pipeline import Pipeline
from gateway.scoring.pool import WorkerPool
from transforms.errors import VideoError

log = logging.getLogger("lastmile.worker")


class FetchRules(BaseModel):
    """Where a worker may read video bytes from: relative paths under ``base`` (a manifest's folder), ``file://``
    under ``sources.file_roots``, ``http(s)://`` to ``sources.http_allow_hosts``, ``s3://`` and ``az://`` under
    ``sources.object_stores``, at most ``max_bytes``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    sources: SourceSettings = SourceSettings()
    base: Path | None = None
    max_bytes: int | None = None

    def fetch(self, uri: str) -> bytes:
        s = self.sources
        return fetch(
            uri,
            self.base,
            roots=s.file_roots,
            max_bytes=self.max_bytes,
            http_allow_hosts=s.http_allow_hosts,
            http_timeout_s=s.http_timeout_s,
            http_total_s=s.http_total_s,
            http_redirect_to_http=s.http_redirect_to_http,
            object_stores=s.object_stores,
            stores=s.stores(),
        )


class VideoRequest(VideoFacts):
    """One video for a worker: what is known about it, its bytes (inline) or a URI, and its conditions."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    uri: str | None = None
    inline: bytes | None = None
    sha256: Sha256 | None = None  # what its bytes must hash to (its manifest row's, its event's); None: unchecked
    conditions: tuple[str, ...] | None = None  # None: every condition of the pipeline
    detectors: tuple[str, ...] | None = None  # None: every detector (a shadow challenger may be left out)

    def item(self, data: bytes) -> VideoItem:
        return VideoItem(**VideoFacts.of(self), data=data)


Fault = Literal["unavailable", "unexpected"]


class Answer(BaseModel):
    """A worker's answer for one video: its rows, and why they are no verdict when they are not (``fault``:
    a runtime was ``unavailable``, caught as :class:`RuntimeUnavailable`; or an ``unexpected`` exception), with
    the reason."""

    model_config = ConfigDict(frozen=True)
    rows: list[ScoreRow]
    fault: Fault | None = None
    reason: str = ""
    down: str = "scorer"  # the part that was unavailable: "scorer", or the "store" the video lies in


def handle(pipeline: Pipeline, rules: FetchRules, request: VideoRequest) -> Answer:
    """Every (condition, detector) row of one video. A video that cannot be fetched gets video-error rows;
    anything unexpected (not this video's known fault) gets infra rows and ``fault="unexpected"``."""
    try:
        data = request.inline if request.inline is not None else rules.fetch(request.uri or "")
        check_digest(data, request.sha256)
        item, detectors = request.item(data), pipeline.scorers(request.detectors)
        scoring = pipeline.score(item, pipeline.select(request.conditions), detectors)
    except SourceUnavailable as exc:  # its store did not answer: no verdict, run again after the backoff
        rows = error_rows(pipeline, request, exc, kind="infra")
        return Answer(rows=rows, fault="unavailable", reason=str(exc), down="store")
    except VideoError as exc:  # (rows of bytes that were not the video's carry the sha256 of what was read)
        digest = exc.digest if isinstance(exc, ContentMismatch) else None
        return Answer(rows=error_rows(pipeline, request, exc, digest=digest))
    except Exception as exc:  # a bug or an exhausted resource: say so in the rows, keep the worker
        log.exception("unexpected failure on %s", request.video_id)
        reason = f"{type(exc).__name__}: {exc}"
        return Answer(rows=error_rows(pipeline, request, exc, kind="infra"), fault="unexpected", reason=reason)
    if scoring.unavailable is not None:
        return Answer(rows=scoring.rows, fault="unavailable", reason=scoring.unavailable)
    return Answer(rows=scoring.rows)


def error_rows(
    pipeline: Pipeline, request: VideoRequest, exc: Exception, kind: str = "video", digest: str | None = None
) -> list[ScoreRow]:
    """The rows of a video that was not scored: one per (condition it asked for, detector), carrying ``exc``.
    Written in the worker, or in a parent whose worker could not answer (``digest``: the input's sha256, None
    where it was not read)."""
    conditions, detectors = pipeline.select(request.conditions), pipeline.scorers(request.detectors)
    return pipeline.error_rows(request.item(b""), exc, conditions, digest, kind, detectors)


# -- the process side: one pipeline per worker process ---------------------------------------------------------
_STATE: tuple[Pipeline, FetchRules] | None = None


def init(settings_json: str, rules_json: str) -> None:
    """Pool initializer: build this process's pipeline (conditions, detectors, runtimes) once."""
    from gateway.scoring.assembly import build_pipeline

    global _STATE
    _STATE = (
        build_pipeline(PipelineSettings.model_validate_json(settings_json)),
        FetchRules.model_validate_json(rules_json),
    )


def run(request: VideoRequest) -> Answer:
    """Score one video in this worker process."""
    if _STATE is None:
        raise RuntimeError("gateway.scoring.worker.init was not called in this process")
    pipeline, rules = _STATE
    return handle(pipeline, rules, request)


@dataclass(frozen=True)
class Entry:
    """What a worker process runs: ``init(settings_json, rules_json)`` once, then ``run(request) -> Answer`` per
    video; both module-level functions, so that a spawned process can import them."""

    run: Callable[[VideoRequest], Answer]
    init: Callable[[str, str], None]


ENTRY = Entry(run, init)


def start_pool(settings: PipelineSettings, rules: FetchRules, size: int, entry: Entry = ENTRY) -> WorkerPool:
    """``size`` worker processes running ``entry``, with the settings' memory cap and per-video deadline."""
    limits = settings.limits
    args = initargs(settings, rules)
    return WorkerPool(
        size, entry.run, entry.init, args, memory_mb=limits.worker_memory_mb, timeout_s=limits.video_timeout_s
    )


def initargs(settings: PipelineSettings, rules: FetchRules) -> tuple[str, str]:
    """The arguments :func:`init` takes, for a pool's ``initargs`` (JSON: a spawned process rebuilds them)."""
    return (PipelineSettings.model_validate(settings.model_dump()).model_dump_json(), rules.model_dump_json())
