"""The platform's own upload events, read as video events: ``input:`` in the gateway's configuration says the
format of the value (``json``, ``avro``, ``protobuf``) and, as JMESPath expressions, where each field comes from.

With no ``input:`` (or no ``fields``), the value is the project's own video event (:mod:`gateway.core.messages`).
With ``fields``, ``video_id`` and either ``uri`` or ``bucket`` + ``key`` (with ``store``: ``s3``, ``az`` or ``gs``) are
required; ``label``, ``event_time`` and ``sha256`` are optional. An expression that finds nothing for a required
field, or a value of the wrong type, makes the message an :class:`~gateway.core.messages.InvalidMessage` whose
reason names the field and the expression: it is dead-lettered before anything is fetched.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Self

import jmespath
import jmespath.exceptions
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from gateway.core.messages import InvalidMessage, VideoEvent
from gateway.core.sources.stores import EXTRA, installed
from transforms.support.config_errors import describe

REQUIRED = ("video_id",)
LABELS = {"real": "real", "generated": "generated", "fake": "generated"}
_MS_EPOCH = 1e11  # an event_time number above this is milliseconds since the epoch (1e11 s is the year 5138)


class FieldMap(BaseModel):
    """Where each field of the video event comes from in the decoded message: a JMESPath expression each."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    video_id: str
    uri: str | None = None
    bucket: str | None = None
    key: str | None = None
    label: str | None = None
    event_time: str | None = None
    sha256: str | None = None

    @field_validator("*")
    @classmethod
    def _compiles(cls, expression: str | None) -> str | None:
        if expression is not None:
            try:
                jmespath.compile(expression)
            except jmespath.exceptions.JMESPathError as exc:
                raise ValueError(f"JMESPath expression {expression!r} does not parse: {exc}") from exc
        return expression

    @model_validator(mode="after")
    def _names_the_video(self) -> Self:
        if (self.uri is None) == (self.bucket is None and self.key is None):
            raise ValueError("fields need either 'uri', or 'bucket' and 'key' (with input.store)")
        if (self.bucket is None) != (self.key is None):
            raise ValueError("fields 'bucket' and 'key' go together")
        return self


class InputSettings(BaseModel):
    """How the input topic's values are read (``input:``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    format: Literal["json", "avro", "protobuf"] = "json"
    fields: FieldMap | None = Field(None, description="JMESPath per field; None: the project's own video event")
    store: Literal["s3", "az", "gs"] | None = Field(None, description="the store that 'bucket' and 'key' name")
    schema_registry: dict[str, str] | None = Field(
        None, description="the Schema Registry client's settings ('url', 'basic.auth.user.info', ...)"
    )
    schema_file: Path | None = Field(None, description="an Avro schema (.avsc), or a protobuf descriptor set")
    message: str | None = Field(None, description="protobuf: the message's full name in the descriptor set")

    @model_validator(mode="after")
    def _complete(self) -> Self:
        if self.format != "json" and self.fields is None:
            raise ValueError(f"input.format {self.format} needs input.fields (the project's own event is JSON)")
        if self.fields is not None and self.fields.bucket is not None and self.store is None:
            raise ValueError("input.fields names 'bucket' and 'key': input.store says which store (s3 or az)")
        if self.format == "avro" and not (self.schema_registry or self.schema_file):
            raise ValueError("input.format avro needs input.schema_registry or input.schema_file")
        if self.format == "protobuf" and not (self.schema_file and self.message):
            raise ValueError("input.format protobuf needs input.schema_file (a descriptor set) and input.message")
        if self.schema_registry is not None and "url" not in self.schema_registry:
            raise ValueError("input.schema_registry needs its 'url'")
        if self.format != "json":
            needed = ["fastavro"] if self.format == "avro" else ["google.protobuf"]
            needed += ["authlib"] if self.schema_registry or self.format == "protobuf" else []
            missing = [m for m in needed if not installed(m)]
            if missing:
                raise ValueError(
                    f"input.format {self.format} is read with confluent-kafka's serdes, which need "
                    f"{', '.join(missing)}: {EXTRA}"
                )
        return self

    @property
    def foreign(self) -> bool:
        """Whether the values are the platform's own events (mapped), not the project's."""
        return self.fields is not None


class Mapped(BaseModel):
    """What the mapping took from one message: the video event, and the event's own time (None: not mapped)."""

    model_config = ConfigDict(frozen=True)
    event: VideoEvent
    event_time: float | None = None


def map_message(message: Any, settings: InputSettings) -> Mapped:
    """The video event ``message`` (decoded JSON, Avro or protobuf) maps to under ``settings.fields``;
    :class:`InvalidMessage` naming the field and its expression when one finds nothing or the wrong type."""
    fields = settings.fields
    if fields is None:
        raise ValueError("map_message needs input.fields")
    found = {name: _search(name, expr, message) for name, expr in fields.model_dump().items() if expr is not None}
    out: dict[str, Any] = {"video_id": _text("video_id", fields.video_id, found["video_id"], number=True)}
    if fields.uri is not None:
        out["uri"] = _text("uri", fields.uri, found["uri"])
    else:
        bucket = _text("bucket", str(fields.bucket), found["bucket"])
        key = _text("key", str(fields.key), found["key"])
        out["uri"] = f"{settings.store}://{bucket}/{key}"
    if found.get("label") is not None:
        label = found["label"]
        if not isinstance(label, str) or label.lower() not in LABELS:
            raise _failed("label", str(fields.label), f"found {_shown(label)}, not 'real' or 'generated'")
        out["label"] = LABELS[label.lower()]
    if found.get("sha256") is not None:
        out["sha256"] = _text("sha256", str(fields.sha256), found["sha256"])
    event_time = None
    if found.get("event_time") is not None:
        event_time = _seconds(str(fields.event_time), found["event_time"])
    try:
        return Mapped(event=VideoEvent.model_validate(out), event_time=event_time)
    except ValidationError as exc:  # the mapped values, checked as the project's own event's are
        raise InvalidMessage(describe(exc, "the mapped video event", VideoEvent)) from exc


def _search(name: str, expression: str, message: Any) -> Any:
    try:
        return jmespath.search(expression, message)
    except jmespath.exceptions.JMESPathError as exc:  # a function given the wrong type, and the like
        raise _failed(name, expression, f"failed: {exc}") from exc


def _text(name: str, expression: str, value: Any, number: bool = False) -> str:
    if value is None:
        raise _failed(name, expression, "found nothing in the message")
    if isinstance(value, str) and value:
        return value
    if number and isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise _failed(name, expression, f"found {_shown(value)}, not a non-empty string")


def _seconds(expression: str, value: Any) -> float:
    """An event time as seconds since the epoch: a number (seconds, or milliseconds when over 1e11) or an ISO 8601
    text with its offset."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return value / 1000 if value > _MS_EPOCH else float(value)
    if isinstance(value, str) and re.match(r"\d{4}-\d\d-\d\d", value):
        try:
            stamp = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            stamp = None
        if stamp is not None and stamp.tzinfo is not None:
            return stamp.timestamp()
    why = f"found {_shown(value)}, not seconds or milliseconds since the epoch, nor ISO 8601 with an offset"
    raise _failed("event_time", expression, why)


def _failed(name: str, expression: str, why: str) -> InvalidMessage:
    return InvalidMessage(f"input.fields.{name}: expression {expression!r} {why}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."
