"""Typed records at the gateway's boundaries. Every score carries its provenance."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 2  # 2: score events carry event_time and canary


def idempotency_key(video_id: str, condition: str, detector: str, version: str) -> str:
    """The key score events are de-duplicated by: one score per (video, condition, detector, version)."""
    return f"{video_id}|{condition}|{detector}|{version}"


class VideoItem(BaseModel):
    """One video to score: its bytes and what is known about it (from a manifest row or a Kafka event)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    video_id: str
    data: bytes = Field(repr=False)
    label: Literal["real", "generated"] | None = None
    source: str | None = None
    anchor_id: str | None = None
    tenant: str | None = None


class ScoreRow(BaseModel):
    """One (video, condition, detector) result, or the error that prevented it (failures stay counted)."""

    model_config = ConfigDict(frozen=True)
    schema_version: int = SCHEMA_VERSION
    video_id: str
    condition: str
    detector: str
    detector_version: str
    runtime: str
    runtime_endpoint: str | None = None  # the server of a remote detector (runtime "remote")
    label: str | None = None
    source: str | None = None
    anchor_id: str | None = None
    score: float | None = None
    decision: bool | None = None
    threshold: float | None = None
    error: str | None = None
    error_kind: Literal["video", "infra"] | None = None
    error_class: str | None = None
    input_sha256: str | None = None
    spec_hash: str | None = None
    profile: str | None = None
    variant_sha256: str | None = None
    model_sha256: str | None = None
    width: int | None = None
    height: int | None = None
    fps: float | None = None
    frames: int | None = None
    transform_s: float | None = None
    variant_s: float | None = None  # this condition's own share of the encode time (shared steps divided)
    sample_s: float | None = None
    infer_s: float | None = None
    event_time: float | None = None  # the input message's Kafka timestamp (s): the monitor's windows run on it
    canary: bool = False  # a labelled canary video (``lastmile canary``): moderation consumers drop these

    @property
    def key(self) -> str:
        """The idempotency key: one score per (video, condition, detector, version)."""
        return idempotency_key(self.video_id, self.condition, self.detector, self.detector_version)


TIMING_FIELDS = ("transform_s", "variant_s", "sample_s", "infer_s")


class VideoEvent(BaseModel):
    """An input-topic message by reference (JSON value). Inline videos carry the bytes as the value and these
    fields as ``lastmile-*`` headers instead."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = SCHEMA_VERSION
    video_id: str = Field(min_length=1, max_length=256)
    uri: str | None = None
    label: Literal["real", "generated"] | None = None
    source: str | None = None
    anchor_id: str | None = None
    tenant: str | None = None
    canary: bool = False  # fed by ``lastmile canary``; its score events carry the flag


class ScoreEvent(ScoreRow):
    """An output-topic message, keyed by ``video_id``; ``key`` is the idempotency key consumers de-duplicate by."""

    idempotency_key: str


class LabelEvent(BaseModel):
    """Delayed ground truth on the labels topic, joined to scores by ``video_id``."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = SCHEMA_VERSION
    video_id: str
    label: Literal["real", "generated"]
    source: str | None = None
    anchor_id: str | None = None


INLINE_CONTENT_TYPE = "application/octet-stream"
HEADER_PREFIX = "lastmile-"


def inline_headers(event: VideoEvent) -> list[tuple[str, bytes]]:
    """Headers of an inline video message: the event's fields (bytes go in the value)."""
    fields = event.model_dump(exclude_none=True, exclude={"uri"})
    headers = [("content-type", INLINE_CONTENT_TYPE.encode())]
    return headers + [(HEADER_PREFIX + k.replace("_", "-"), str(v).encode()) for k, v in fields.items()]


def parse_video_message(value: bytes, headers: list[tuple[str, bytes]] | None) -> tuple[VideoEvent, bytes | None]:
    """(event, inline bytes or None) from a Kafka message; raises ``ValueError`` for a malformed one."""
    hdr = {k: v for k, v in headers or []}
    if hdr.get("content-type", b"").decode(errors="replace") == INLINE_CONTENT_TYPE:
        fields = {
            k[len(HEADER_PREFIX) :].replace("-", "_"): v.decode() for k, v in hdr.items() if k.startswith(HEADER_PREFIX)
        }
        return VideoEvent.model_validate(fields), value
    event = VideoEvent.model_validate_json(value)
    if not event.uri:
        raise ValueError("a video event without inline bytes needs a 'uri'")
    return event, None
