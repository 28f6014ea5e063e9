"""Publishing a video's results: score events on the output topic and, for a failed video, a dead letter with
the original value and headers (a null header value goes empty: :meth:`gateway.bus.Producer.send`) plus
``lastmile-error-class`` and ``lastmile-error-message``. Every send is acknowledged by the broker before it
returns, so the caller may then commit the input offset."""

from __future__ import annotations

import time

from gateway.bus import Delivery, Producer
from gateway.core.config import KafkaSettings
from gateway.core.messages import ScoreEvent, ScoreRow


class Publisher:
    def __init__(self, producer: Producer, settings: KafkaSettings) -> None:
        if not isinstance(producer, Producer):  # temporary: a raw client from gateway.stream.kafka_io
            producer = Producer(producer, settings.ack_timeout_s)
        self.producer, self.settings = producer, settings

    def publish(self, rows: list[ScoreRow], original: bytes, headers: list, video_id: str) -> ScoreRow | None:
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
        failed = [r for r in rows if r.error_kind == "video"]
        cause = failed[0] if rows and len(failed) == len(rows) else None
        if cause is not None:
            deliveries.append(
                self._send_dead_letter(
                    original, headers, cause.error_class or "VideoError", cause.error or "", video_id
                )
            )
        self._await(deliveries)
        return cause

    def dead_letter(
        self,
        original: bytes,
        headers: list,
        error_class: str,
        message: str,
        video_id: str | None,
        key: bytes | None = None,
    ) -> None:
        """A message that is not a video event at all, dead-lettered with its reason (keyed by its video id, else
        by the original record's ``key``); acknowledged."""
        self._await([self._send_dead_letter(original, headers, error_class, message, video_id, key)])

    def _send_dead_letter(
        self, original: bytes, headers: list, error_class: str, message: str, video_id: str | None, key=None
    ) -> Delivery:
        extra = [
            ("lastmile-error-class", error_class.encode()),
            ("lastmile-error-message", message.encode(errors="replace")[:1000]),
        ]
        key = video_id.encode() if video_id else key
        return self.producer.send(self.settings.dlq, original, key=key, headers=[*(headers or []), *extra])

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
