"""``lastmile canary run``: labelled videos from a manifest fed into the input topic at a steady rate, each with
a fresh ``video_id`` and ``canary: true``, so the monitor has a labelled population (``population="canary"``)
even where production labels never come.

The flag travels to every score event of the video (``ScoreEvent.canary``): a moderation consumer drops
those events (they are not user uploads), and the monitor reports them apart from labelled traffic.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import re
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from detectors.manifest import ManifestRow, read_manifest
from gateway import bus
from gateway.client.send import FileDigests, Item, SendError, check_digest, manifest_item, video_message
from gateway.core.kafka_settings import KafkaSettings
from gateway.core.messages import VideoMessage

log = logging.getLogger("lastmile.canary")


class CanaryError(ValueError):
    """A canary feed that cannot run as asked (bad rate, empty manifest, a video too large to send inline, a file
    changed since its manifest hashed it)."""


def parse_rate(text: str) -> float:
    """Videos per second from ``N/min``, ``N/s`` or ``N/h``."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|min|h|hour)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise CanaryError(f"rate {text!r}: expected e.g. 6/min, 1/s or 30/h")
    per = {"s": 1, "sec": 1, "min": 60, "h": 3600, "hour": 3600}[m.group(2)]
    return float(m.group(1)) / per


@dataclass
class CanaryFeed:
    """The manifest's videos sent ``per_second``, each message built and checked as `lastmile send` does
    (:mod:`gateway.client.send`). ``inline`` False sends them by reference, which needs the gateways to share the
    manifest's folder (``sources.file_roots``); ``digests`` False leaves the rows' sha256 out (a gateway from before
    2026-12-04 refuses the key); ``hashes`` may be shared with the ``Sender.check`` run before the feed, so an
    unchanged file is hashed once."""

    kafka: KafkaSettings
    manifest: Path
    per_second: float
    inline: bool = True
    digests: bool = True
    hashes: FileDigests = field(default_factory=FileDigests, repr=False)

    def rows(self) -> list[ManifestRow]:
        rows = read_manifest(self.manifest)
        if not rows:
            raise CanaryError(f"{self.manifest}: no videos")
        return rows

    def message(self, row: ManifestRow) -> VideoMessage:
        """One canary message for a manifest row: a fresh video_id each time, the row's label and source. A file
        changed since its manifest hashed it is refused each time (a canary of it would be dead-lettered)."""
        video_id = f"canary-{row.video_id}-{uuid.uuid4().hex[:12]}"
        try:
            # a URL as it is, a path as file:// (as `lastmile send`)
            item = dataclasses.replace(manifest_item(self.manifest, row), video_id=video_id)
            data = self._inline_bytes(item) if self.inline else None
            check_digest(item, self.hashes)
        except SendError as exc:
            raise CanaryError(str(exc)) from exc
        return video_message(item, data, self.digests, canary=True)

    def messages(self) -> Iterator[VideoMessage]:
        """The manifest's rows in order, over and over."""
        for row in itertools.cycle(self.rows()):
            yield self.message(row)

    def _inline_bytes(self, item: Item) -> bytes:
        if item.path is None:
            raise CanaryError(f"{item.name}: a URL cannot be sent inline (the gateway fetches it); use --by-reference")
        data = item.path.read_bytes()
        if len(data) > self.kafka.max_message_bytes:
            raise CanaryError(f"{item.path} is {len(data)} bytes, over kafka.max_message_bytes; send it by reference")
        return data

    def run(self, count: int | None = None, stop: threading.Event | None = None) -> int:
        """Send ``count`` canaries (None: until ``stop``), one every 1/rate seconds, each acknowledged by the
        broker before the next; returns how many were sent."""
        stop = stop or threading.Event()
        # a broker that does not answer: one line within seconds
        bus.ping(self.kafka)
        producer = bus.producer(self.kafka)
        sent = 0
        try:
            for msg in itertools.islice(self.messages(), count):
                if stop.is_set():
                    break
                producer.send_and_wait(self.kafka.input_topic, msg.value, key=msg.key, headers=msg.headers or ())
                sent += 1
                log.info("canary %s sent (%d)", msg.key.decode(), sent)
                # the pacing, not a synchronisation
                if count is None or sent < count:
                    stop.wait(1.0 / self.per_second)
        finally:
            producer.close()
        return sent
