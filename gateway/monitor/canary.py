"""``lastmile canary run``: labelled videos from a manifest fed into the input topic at a steady rate, each with
a fresh ``video_id`` and ``canary: true``, so the monitor has a labelled population (``population="canary"``)
even where production labels never come.

The flag travels to every score event of the video (``ScoreEvent.canary``): a moderation consumer drops
those events (they are not user uploads), and the monitor reports them apart from labelled traffic.
"""

from __future__ import annotations

import hashlib
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
from gateway.client.send import FileDigests, SendError, check_manifest_digest, manifest_item
from gateway.core.kafka_settings import KafkaSettings
from gateway.core.messages import VideoEvent, inline_headers

log = logging.getLogger("lastmile.canary")


class CanaryError(ValueError):
    """A canary feed that cannot run as asked (bad rate, empty manifest, a video too large to send inline, a file
    changed since its manifest hashed it)."""


def _check_digest(name: str, digest: str, expected: str) -> None:
    try:
        check_manifest_digest(name, digest, expected)  # (the refusal `lastmile send` gives)
    except SendError as exc:
        raise CanaryError(str(exc)) from exc


def parse_rate(text: str) -> float:
    """Videos per second from ``N/min``, ``N/s`` or ``N/h``."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*/\s*(s|sec|min|h|hour)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise CanaryError(f"rate {text!r}: expected e.g. 6/min, 1/s or 30/h")
    per = {"s": 1, "sec": 1, "min": 60, "h": 3600, "hour": 3600}[m.group(2)]
    return float(m.group(1)) / per


@dataclass(frozen=True)
class Message:
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]] | None


@dataclass
class CanaryFeed:
    kafka: KafkaSettings
    manifest: Path
    per_second: float
    inline: bool = True  # by reference needs the gateways to share the manifest's folder (sources.file_roots)
    digests: bool = True  # False: the rows' sha256 left out (a gateway from before 2026-12-04 refuses the key)
    hashes: FileDigests = field(default_factory=FileDigests, repr=False)  # by reference; shared with Sender.check

    def rows(self) -> list[ManifestRow]:
        rows = read_manifest(self.manifest)
        if not rows:
            raise CanaryError(f"{self.manifest}: no videos")
        return rows

    def message(self, row: ManifestRow) -> Message:
        """One canary message for a manifest row: a fresh video_id each time, the row's label and source."""
        video_id = f"canary-{row.video_id}-{uuid.uuid4().hex[:12]}"
        try:
            item = manifest_item(self.manifest, row)  # a URL as it is, a path as file:// (as `lastmile send`)
        except SendError as exc:
            raise CanaryError(str(exc)) from exc
        fields = {"video_id": video_id, "label": row.label, "source": row.source, "anchor_id": row.anchor_id}
        fields["sha256"] = row.sha256 if self.digests else None  # (a file changed since its manifest: not scored)
        if not self.inline:
            if row.sha256 is not None:
                self._check_file(item.path, row.sha256, item.name)
            event = VideoEvent(**fields, uri=item.uri, canary=True)
            return Message(video_id.encode(), event.model_dump_json(exclude_none=True).encode(), None)
        if item.path is None:
            raise CanaryError(f"{item.name}: a URL cannot be sent inline (the gateway fetches it); use --by-reference")
        path = item.path
        data = path.read_bytes()
        if len(data) > self.kafka.max_message_bytes:
            raise CanaryError(f"{path} is {len(data)} bytes, over kafka.max_message_bytes; send it by reference")
        if row.sha256 is not None:
            _check_digest(item.name, hashlib.sha256(data).hexdigest(), row.sha256)
        return Message(video_id.encode(), data, inline_headers(VideoEvent(**fields, canary=True)))

    def messages(self) -> Iterator[Message]:
        """The manifest's rows in order, over and over."""
        for row in itertools.cycle(self.rows()):
            yield self.message(row)

    def _check_file(self, path: Path | None, expected: str, name: str) -> None:
        """A by-reference row's file still has its manifest's sha256: hashed again only when its size or mtime
        changed since it last was (a canary of a changed file would be dead-lettered each time it is sent)."""
        if path is not None:  # (a URL: the gateway checks what it fetches)
            _check_digest(name, self.hashes(path), expected)

    def run(self, count: int | None = None, stop: threading.Event | None = None) -> int:
        """Send ``count`` canaries (None: until ``stop``), one every 1/rate seconds, each acknowledged by the
        broker before the next; returns how many were sent."""
        stop = stop or threading.Event()
        bus.ping(self.kafka)  # a broker that does not answer: one line within seconds
        producer = bus.producer(self.kafka)
        sent = 0
        try:
            for msg in itertools.islice(self.messages(), count):
                if stop.is_set():
                    break
                producer.send_and_wait(self.kafka.input_topic, msg.value, key=msg.key, headers=msg.headers or ())
                sent += 1
                log.info("canary %s sent (%d)", msg.key.decode(), sent)
                if count is None or sent < count:
                    stop.wait(1.0 / self.per_second)  # the pacing, not a synchronisation
        finally:
            producer.close()
        return sent
