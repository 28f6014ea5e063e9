"""Typed records at the gateway's boundaries. Every score carries its provenance."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


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
    sample_s: float | None = None
    infer_s: float | None = None

    @property
    def key(self) -> str:
        """The idempotency key: one score per (video, condition, detector, version)."""
        return f"{self.video_id}|{self.condition}|{self.detector}|{self.detector_version}"


TIMING_FIELDS = ("transform_s", "sample_s", "infer_s")
