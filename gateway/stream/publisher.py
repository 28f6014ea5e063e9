"""Publishing a video's results: score events on the output topic and, for a failed video, a dead letter with
the original value and headers (a null header value goes empty: :meth:`gateway.bus.Producer.send`) plus
``lastmile-error-class``, ``lastmile-error-message`` and, when known, where the record was
(``lastmile-source-topic``, ``-partition``, ``-offset``). Every send is acknowledged by the broker before it
returns, so the caller may then commit the input offset.

A dead letter never blocks its partition: one over ``max_message_bytes`` is reduced (the value dropped, with
``lastmile-dropped-value-bytes``; then the original headers cut to :data:`KEPT_HEADERS` of at most
:data:`KEPT_HEADER_BYTES`, with ``lastmile-headers-truncated``), and one the broker still refuses as too large
(its own limit may be lower) is sent again with the reason and the source alone."""

from __future__ import annotations

import time
from typing import NamedTuple

from gateway.bus import Delivery, Producer, RecordTooLarge
from gateway.core.kafka_settings import KafkaSettings
from gateway.core.messages import ScoreEvent, ScoreRow

KEPT_HEADERS = 64  # of a reduced dead letter: the original headers kept, each value cut to KEPT_HEADER_BYTES
KEPT_HEADER_BYTES = 1024
RECORD_OVERHEAD_BYTES = 128  # a record's framing in a batch, beyond its key, value and headers, rounded up
Headers = list[tuple[str, bytes | None]]


class Source(NamedTuple):
    """Where an input record was: named by its dead letter."""

    topic: str
    partition: int
    offset: int

    def headers(self) -> Headers:
        return [
            ("lastmile-source-topic", self.topic.encode()),
            ("lastmile-source-partition", str(self.partition).encode()),
            ("lastmile-source-offset", str(self.offset).encode()),
        ]


class Publisher:
    def __init__(self, producer: Producer, settings: KafkaSettings) -> None:
        self.producer, self.settings = producer, settings

    def publish(
        self, rows: list[ScoreRow], original: bytes, headers: list, video_id: str, source: Source | None = None
    ) -> ScoreRow | None:
        """Score events for ``rows`` and, when every row failed on the video, its dead letter; acknowledged.

        Returns the row whose error dead-lettered the video, or None when it was scored.
        """
        deliveries = [
            self.producer.send(
                self.settings.output_topic,
                ScoreEvent(**row.model_dump(), idempotency_key=row.key).model_dump_json().encode(),
                key=row.video_id.encode(),
            )
            for row in rows
        ]
        self._await(deliveries)
        failed = [r for r in rows if r.error_kind == "video"]
        cause = failed[0] if rows and len(failed) == len(rows) else None
        if cause is not None:
            error_class = cause.error_class or "VideoError"
            self.dead_letter(original, headers, error_class, cause.error or "", video_id, source=source)
        return cause

    def dead_letter(
        self,
        original: bytes,
        headers: list,
        error_class: str,
        message: str,
        video_id: str | None,
        key: bytes | None = None,
        source: Source | None = None,
    ) -> None:
        """A record dead-lettered with its reason (keyed by its video id, else by the original record's ``key``),
        reduced to fit; acknowledged."""
        reason = [
            ("lastmile-error-class", error_class.encode()),
            ("lastmile-error-message", message.encode(errors="replace")[:1000]),
            *(source.headers() if source is not None else []),
        ]
        key = video_id.encode() if video_id else key
        value, kept = self._fit(original or b"", list(headers or []), reason, key)
        try:
            self._await([self.producer.send(self.settings.dlq, value, key=key, headers=[*kept, *reason])])
        except RecordTooLarge:  # the broker's own limit is lower than ours: the reason and the source alone
            dropped = [("lastmile-dropped-value-bytes", str(len(original or b"")).encode())]
            self._await([self.producer.send(self.settings.dlq, b"", key=key, headers=[*reason, *dropped])])

    def _fit(self, value: bytes, headers: Headers, reason: Headers, key: bytes | None) -> tuple[bytes, Headers]:
        """The value and original headers a dead letter may carry within ``max_message_bytes``."""
        limit = self.settings.max_message_bytes
        if _size(value, [*headers, *reason], key) <= limit:
            return value, headers
        headers = [*headers, ("lastmile-dropped-value-bytes", str(len(value)).encode())]
        if _size(b"", [*headers, *reason], key) <= limit:
            return b"", headers
        notes = [headers[-1], ("lastmile-headers-truncated", str(len(headers) - 1).encode())]
        budget = limit - _size(b"", [*notes, *reason], key)
        kept: Headers = []
        for k, v in headers[: min(KEPT_HEADERS, len(headers) - 1)]:  # in order, while they fit
            item = (k[:KEPT_HEADER_BYTES], None if v is None else v[:KEPT_HEADER_BYTES])
            budget -= _size(b"", [item], None) - RECORD_OVERHEAD_BYTES
            if budget < 0:
                break
            kept.append(item)
        return b"", [*kept, *notes]

    def _await(self, deliveries: list[Delivery]) -> None:
        """Wait at most ``ack_timeout_s`` in all (a frozen broker must not freeze the caller); raise unless every
        send was acknowledged, so the offset stays uncommitted."""
        deadline = time.monotonic() + self.settings.ack_timeout_s
        self.producer.flush(self.settings.ack_timeout_s)
        for d in deliveries:
            d.wait(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        self.producer.flush(self.settings.ack_timeout_s)
        self.producer.close(self.settings.ack_timeout_s)


def _size(value: bytes, headers: Headers, key: bytes | None) -> int:
    """A record's size in a batch, rounded up (varint framing counted as its largest)."""
    fields = sum(len(k.encode(errors="replace")) + len(v or b"") + 10 for k, v in headers)
    return RECORD_OVERHEAD_BYTES + len(key or b"") + len(value) + fields
