"""Typed records at the gateway's boundaries. Every score carries its provenance."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from detectors.manifest import Sha256
from detectors.thresholds import CARD_THRESHOLD
from transforms.support.config_errors import describe

# 2: score events carry event_time and canary
SCHEMA_VERSION = 2
# video events the gateway reads (version 2 changed only score events)
READ_VERSIONS = (1, 2)
MAX_VIDEO_ID_CHARS = 256
# default bound of a video message's string fields (``messages.max_field_bytes``)
MAX_FIELD_BYTES = 1024
# default bound of its ``uri`` (``messages.max_uri_bytes``): signed URLs run long
MAX_URI_BYTES = 8192
# a row's error message is cut to this (:meth:`gateway.scoring.pipeline.Pipeline.error_rows`)
MAX_ERROR_CHARS = 500
# a score event's JSON without the strings it copies from its message and its error
ROW_OVERHEAD_BYTES = 4096


class InvalidMessage(ValueError):
    """An input-topic message that is not a video event: not JSON, a duplicate key or header, a null or non-UTF-8
    ``lastmile-*`` header, an unknown ``schema_version``, an unknown, missing, malformed or over-long field. It is
    dead-lettered before any fetch."""


def idempotency_key(video_id: str, condition: str, detector: str, version: str) -> str:
    """The key score events are de-duplicated by: one score per (video, condition, detector, version)."""
    return f"{video_id}|{condition}|{detector}|{version}"


def series_version(version: str, threshold_id: str | None) -> str:
    """The version a score counts under: the card's, with the id of a recalibrated threshold (``1.0+cal-...``), so
    that no series of the monitor mixes two thresholds' decisions and a consumer's idempotency key tells a decision
    before a calibration from one after it. A card's own threshold (or none) adds nothing."""
    return version if threshold_id in (None, CARD_THRESHOLD) else f"{version}+{threshold_id}"


class VideoFacts(BaseModel):
    """Who a video is and where it came from: what its manifest row or Kafka event says and its score rows carry.
    Copied whole from one record to the next with :meth:`of`, never field by field."""

    model_config = ConfigDict(frozen=True)
    video_id: str
    label: Literal["real", "generated"] | None = None
    source: str | None = None
    anchor_id: str | None = None
    tenant: str | None = None
    # the input message's Kafka timestamp (s)
    event_time: float | None = None
    # a labelled canary video (``lastmile canary``)
    canary: bool = False

    @classmethod
    def of(cls, record: object, **more: object) -> dict[str, object]:
        """The facts that ``record``'s model declares (a manifest row has no tenant, an event no event time), with
        ``more``."""
        declared = getattr(type(record), "model_fields", {})
        return {name: getattr(record, name) for name in VideoFacts.model_fields if name in declared} | more


class VideoItem(VideoFacts):
    """One video to score: its bytes and what is known about it (from a manifest row or a Kafka event)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    data: bytes = Field(repr=False)


class ScoreRow(BaseModel):
    """One (video, condition, detector) result, or the error that prevented it (failures stay counted)."""

    model_config = ConfigDict(frozen=True)
    schema_version: int = SCHEMA_VERSION
    video_id: str
    condition: str
    detector: str
    detector_version: str
    runtime: str
    # the server of a remote detector (runtime "remote")
    runtime_endpoint: str | None = None
    label: str | None = None
    source: str | None = None
    anchor_id: str | None = None
    # NaN or an infinity is no score
    score: float | None = Field(default=None, allow_inf_nan=False)
    decision: bool | None = None
    # None with a decision: a verdict decided
    threshold: float | None = Field(default=None, allow_inf_nan=False)
    # which threshold decided: "card", or a calibration's "cal-..." (series_version)
    threshold_id: str | None = None
    # a diagnostic chat reply's aspects: a JSON object, aspect -> 0-100
    aspects: str | None = None
    # a chat reply's usage: the prompt's tokens
    tokens_in: int | None = None
    # and the reply's
    tokens_out: int | None = None
    # a chat reply read from the cache (its tokens not paid again)
    cached: bool | None = None
    error: str | None = None
    # reply: a chat reply that says no verdict
    error_kind: Literal["video", "infra", "reply"] | None = None
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
    # this condition's own share of the encode time (shared steps divided)
    variant_s: float | None = None
    sample_s: float | None = None
    infer_s: float | None = None
    # the input message's Kafka timestamp (s): the monitor's windows run on it
    event_time: float | None = None
    # a labelled canary video (``lastmile canary``): moderation consumers drop these
    canary: bool = False

    @property
    def key(self) -> str:
        """The idempotency key: one score per (video, condition, detector, version and threshold)."""
        return idempotency_key(
            self.video_id, self.condition, self.detector, series_version(self.detector_version, self.threshold_id)
        )


TIMING_FIELDS = ("transform_s", "variant_s", "sample_s", "infer_s")


class VideoEvent(BaseModel):
    """An input-topic message by reference (JSON value). Inline videos carry the bytes as the value and these
    fields as ``lastmile-*`` headers instead."""

    model_config = ConfigDict(extra="forbid")
    schema_version: int = SCHEMA_VERSION
    video_id: str = Field(min_length=1, max_length=MAX_VIDEO_ID_CHARS)
    uri: str | None = None
    label: Literal["real", "generated"] | None = None
    source: str | None = None
    anchor_id: str | None = None
    tenant: str | None = None
    # fed by ``lastmile canary``; its score events carry the flag
    canary: bool = False
    # the video's, as its sender knows it: bytes read that differ are not scored
    sha256: Sha256 | None = None

    @field_validator("schema_version")
    @classmethod
    def _readable(cls, version: int) -> int:
        """A version newer (or older) than this gateway knows is refused, never read as if it were one it knows."""
        if version not in READ_VERSIONS:
            known = ", ".join(map(str, READ_VERSIONS))
            raise ValueError(f"schema_version {version} is not supported (supported versions: {known})")
        return version


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


@dataclass(frozen=True)
class VideoMessage:
    """An input-topic message as it is sent, keyed by its video id: by reference, the event as JSON; inline, the
    video's bytes with the event in headers (:func:`inline_headers`). :func:`parse_video_message` reads one."""

    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]] | None = None

    @classmethod
    def of(cls, event: VideoEvent, data: bytes | None = None) -> VideoMessage:
        """``event`` by reference (``data`` None: its ``uri`` names the video), else inline with ``data``."""
        if data is None:
            return cls(event.video_id.encode(), event.model_dump_json(exclude_none=True).encode())
        return cls(event.video_id.encode(), data, inline_headers(event))


def parse_video_message(
    value: bytes | None,
    headers: list[tuple[str, bytes | None]] | None,
    max_field_bytes: int = MAX_FIELD_BYTES,
    max_uri_bytes: int = MAX_URI_BYTES,
) -> tuple[VideoEvent, bytes | None]:
    """(event, inline bytes or None) from a Kafka message; :class:`InvalidMessage` for a malformed one, before
    anything is fetched: every string field is at most ``max_field_bytes`` (UTF-8), the ``uri`` at most
    ``max_uri_bytes``, and a key (or ``lastmile-*`` header) given twice is refused, not resolved. Headers come
    as :func:`clean_headers` gives them; a null value (a tombstone) is refused here (the gateway skips it first)."""
    if value is None:
        raise InvalidMessage("tombstone (null value)")
    try:
        inline = _header_fields(clean_headers(headers))
        fields = inline if inline is not None else json.loads(value.decode(), object_pairs_hook=_unique)
        check_fields(fields, max_field_bytes, max_uri_bytes)
        event = VideoEvent.model_validate(fields)
    except InvalidMessage:
        raise
    except json.JSONDecodeError as exc:
        raise InvalidMessage(f"Invalid JSON: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise InvalidMessage(f"the value is not UTF-8 JSON: {exc}") from exc
    except ValidationError as exc:
        # one line naming the field (pydantic's own text spans lines and a URL)
        raise InvalidMessage(describe(exc, "the video event", VideoEvent)) from exc
    except (ValueError, RecursionError) as exc:
        # absurdly deep nesting
        raise InvalidMessage(str(exc) if isinstance(exc, ValueError) else "JSON nested too deeply") from exc
    if inline is not None:
        return event, value
    if not event.uri:
        raise InvalidMessage("a video event without inline bytes needs a 'uri'")
    return event, None


def clean_headers(headers: object) -> list[tuple[str, bytes | None]]:
    """A record's headers as (name, value) pairs a producer can send again: a name as text (bytes decoded from
    UTF-8, undecodable bytes replaced), a value as bytes or None. :class:`InvalidMessage` for headers that are
    not a list of pairs, or a value that is neither bytes nor text nor None."""
    out = []
    try:
        pairs = [(k, v) for k, v in headers or ()]
    except (TypeError, ValueError) as exc:
        raise InvalidMessage(f"headers are not (name, value) pairs: {exc}") from exc
    for k, v in pairs:
        name = k.decode("utf-8", "replace") if isinstance(k, bytes | bytearray) else k
        if not isinstance(name, str):
            raise InvalidMessage(f"a header name is a {type(k).__name__}, not text")
        if isinstance(v, str):
            v = v.encode("utf-8", "surrogatepass")
        elif v is not None and not isinstance(v, bytes | bytearray | memoryview):
            raise InvalidMessage(f"header {name[:64]!r} has a {type(v).__name__} value, not bytes")
        out.append((name, None if v is None else bytes(v)))
    return out


def _header_fields(headers: list[tuple[str, bytes | None]]) -> dict[str, str] | None:
    """The ``lastmile-*`` header fields of an inline message (None: not inline); duplicates, null values and
    values that are not UTF-8 refused. Other headers are not read."""
    seen: dict[str, bytes] = {}
    for k, v in headers:
        if k == "content-type" or k.startswith(HEADER_PREFIX):
            if k in seen:
                raise InvalidMessage(f"header {k[:64]!r} given twice")
            if v is None:
                raise InvalidMessage(f"header {k[:64]!r} has a null value")
            seen[k] = v
    if seen.get("content-type") != INLINE_CONTENT_TYPE.encode():
        return None
    return {k[len(HEADER_PREFIX) :].replace("-", "_"): _text(k, v) for k, v in seen.items() if k != "content-type"}


def _text(name: str, value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidMessage(f"header {name[:64]!r} is not UTF-8: {exc}") from exc


def _unique(pairs: list[tuple[str, object]]) -> dict[str, object]:
    """A JSON object, refusing a key given twice (readers that keep the first and the last would disagree)."""
    out: dict[str, object] = {}
    for k, v in pairs:
        if k in out:
            raise InvalidMessage(f"duplicate key {k[:64]!r} in the JSON object")
        out[k] = v
    return out


def check_fields(fields: object, max_field_bytes: int, max_uri_bytes: int) -> None:
    """Refuse a value that is no object, holds a field a video event has not, or a string field over its bound."""
    if not isinstance(fields, dict):
        raise InvalidMessage(f"a video event is a JSON object, not {type(fields).__name__}")
    for name, v in fields.items():
        if name not in VideoEvent.model_fields:
            raise InvalidMessage(f"unknown field {name[:64]!r}")
        limit, setting = (max_uri_bytes, "max_uri_bytes") if name == "uri" else (max_field_bytes, "max_field_bytes")
        if isinstance(v, str) and len(v.encode("utf-8", "surrogatepass")) > limit:
            raise InvalidMessage(f"field {name!r} is longer than {limit} bytes (messages.{setting})")


def score_event_bound(max_field_bytes: int = MAX_FIELD_BYTES) -> int:
    """The most bytes one score event takes when its message's fields are bounded by ``max_field_bytes``: the
    fixed fields, plus what it copies from the message (``video_id``, twice with the idempotency key; ``source``,
    ``anchor_id``) and its error message, each JSON-escaped (at most 6 bytes a character, 6 a UTF-8 byte)."""
    video_id = min(MAX_VIDEO_ID_CHARS, max_field_bytes)
    return ROW_OVERHEAD_BYTES + 6 * (2 * video_id + 2 * max_field_bytes + MAX_ERROR_CHARS)
