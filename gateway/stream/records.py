"""One record of the input topic, read once: its key, value and headers, of any nullness, type or encoding, become
a video to score, a refusal to dead-letter with its reason, or a record to skip with a counted reason. Nothing a
record holds raises out of :func:`read`, so no record can stop the gateway or hold its partition back."""

from __future__ import annotations

import time
from dataclasses import dataclass

from gateway.bus import Record, UnreadableRecord
from gateway.core.config import MessageSettings
from gateway.core.messages import InvalidMessage, VideoEvent, clean_headers
from gateway.stream.inputs import EventReader

TOMBSTONE = "skipped_tombstone"  # its outcome in lastmile_videos_total
MAX_REASON_CHARS = 500

Headers = list[tuple[str, bytes | None]]


@dataclass(frozen=True)
class Video:
    """A video event: what the gateway scores."""

    event: VideoEvent
    inline: bytes | None
    value: bytes
    headers: Headers
    event_time: float  # the record's Kafka timestamp (s); the time it was read when it has none


@dataclass(frozen=True)
class Refusal:
    """A record that is no video event: dead-lettered with ``error_class`` and ``reason``, then committed."""

    error_class: str
    reason: str
    value: bytes  # what the dead letter carries: the original value (empty when it is too large or no bytes)
    headers: Headers
    key: bytes | None


@dataclass(frozen=True)
class Skip:
    """A record with nothing to score and nothing wrong with it (a tombstone): counted as ``outcome``, committed."""

    outcome: str
    reason: str


Fetched = Record | UnreadableRecord


def read(
    msg: Fetched, max_message_bytes: int, bounds: MessageSettings, reader: EventReader | None = None
) -> Video | Refusal | Skip:
    """What the gateway does with one record from the bus. Its fields are typed there, but nothing here trusts
    them: a key, value or header of another type is refused (or dropped), never raised on. A record over
    ``max_message_bytes`` is refused by reference: its dead letter carries none of its bytes. ``reader``: how
    the value is read (:mod:`gateway.stream.inputs`; None: the project's own video event)."""
    if isinstance(msg, UnreadableRecord):  # the client could not decode it: refused without its bytes
        return Refusal("InvalidMessage", msg.reason[:MAX_REASON_CHARS], b"", [], None)
    key = msg.key
    key = bytes(key) if isinstance(key, bytes | bytearray | memoryview) else None  # a key of another type: dropped
    value = msg.value
    if value is None:  # a tombstone: a deletion on a compacted topic, no video
        return Skip(TOMBSTONE, "tombstone (null value)")
    size = _record_bytes(key, value, msg.headers)
    if size > max_message_bytes:  # before any parsing; by reference: neither its value nor its headers
        reason = f"message of {size} bytes (key, value and headers); max_message_bytes is {max_message_bytes}"
        return Refusal("MessageTooLarge", reason, b"", [], key)
    try:
        headers = clean_headers(msg.headers)
    except InvalidMessage as exc:
        return Refusal("InvalidMessage", str(exc)[:MAX_REASON_CHARS], _bytes(value), [], key)
    if not isinstance(value, bytes | bytearray | memoryview):
        reason = f"the value is a {type(value).__name__}, not bytes"
        return Refusal("InvalidMessage", reason, b"", headers, key)
    value = bytes(value)
    try:
        event, inline, mapped_time = (reader or EventReader(bounds=bounds)).read(value, headers, msg.topic)
    except InvalidMessage as exc:
        return Refusal("InvalidMessage", str(exc)[:MAX_REASON_CHARS], value, headers, key)
    except Exception as exc:  # a parser bug must not stop the tap: the record is refused with what went wrong
        reason = f"unreadable message ({type(exc).__name__}: {exc})"[:MAX_REASON_CHARS]
        return Refusal("InvalidMessage", reason, value, headers, key)
    stamp = msg.timestamp_ms
    event_time = stamp / 1000 if isinstance(stamp, int) and stamp >= 0 else time.time()
    event_time = event_time if mapped_time is None else mapped_time  # the upload event's own time, when mapped
    return Video(event, inline, value, headers, event_time)


def _bytes(value: object) -> bytes:
    return bytes(value) if isinstance(value, bytes | bytearray | memoryview) else b""


def _record_bytes(key: bytes | None, value: object, headers: object) -> int:
    """A record's size as it counts against ``max_message_bytes``: key, value, header names and values (what is
    not bytes or text counts nothing here; :func:`read` refuses it after)."""

    def n(x: object) -> int:
        if isinstance(x, str):
            return len(x.encode(errors="surrogatepass"))
        return len(x) if isinstance(x, bytes | bytearray | memoryview) else 0

    pairs = headers if isinstance(headers, list | tuple) else ()
    return n(key) + n(value) + sum(n(h[0]) + n(h[1]) for h in pairs if isinstance(h, tuple) and len(h) == 2)
