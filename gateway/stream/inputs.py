"""How the tap reads an input record's value as a video event: the project's own event, or the platform's upload
event under ``input:`` (decoded as JSON, or with confluent-kafka's serdes for Avro and Protobuf, then mapped by
:func:`gateway.core.inputs.map_message`). ``lastmile input check`` reads a sample with the same reader."""

from __future__ import annotations

import json

from gateway.core.config import MessageSettings
from gateway.core.inputs import InputSettings, map_message
from gateway.core.messages import InvalidMessage, VideoEvent, check_fields, parse_video_message
from gateway.stream.schemas import Decode, UndecodableValue, decoder

Headers = list[tuple[str, bytes | None]]


class EventReader:
    """``read(value, headers, topic) -> (event, inline bytes or None, event time or None)``; raises
    :class:`InvalidMessage` for a value that is no video event, with the reason its dead letter gives."""

    def __init__(self, settings: InputSettings | None = None, bounds: MessageSettings | None = None) -> None:
        self.settings = settings or InputSettings()
        self.bounds = bounds or MessageSettings()
        s = self.settings
        self._decode: Decode | None = None
        if s.format != "json":
            self._decode = decoder(s.format, s.schema_registry, s.schema_file, s.message)

    def read(self, value: bytes | None, headers: Headers, topic: str) -> tuple[VideoEvent, bytes | None, float | None]:
        b = self.bounds
        if not self.settings.foreign:
            event, inline = parse_video_message(value, headers, b.max_field_bytes, b.max_uri_bytes)
            return event, inline, None
        if value is None:
            raise InvalidMessage("tombstone (null value)")
        mapped = map_message(self._decoded(value, topic), self.settings)
        check_fields(mapped.event.model_dump(exclude_none=True), b.max_field_bytes, b.max_uri_bytes)
        return mapped.event, None, mapped.event_time

    def _decoded(self, value: bytes, topic: str) -> object:
        if self._decode is not None:
            try:
                return self._decode(value, topic)
            except UndecodableValue as exc:
                raise InvalidMessage(f"input.format {self.settings.format}: {exc}") from exc
        try:
            return json.loads(value)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise InvalidMessage(f"input.format json: the value is not JSON: {exc}") from exc
