"""The bus's plain types: a partition, a record as fetched, and a record the client could not decode. Nothing of
kafka-python's leaks through them: a fetched record's key, value and header values are ``bytes`` or None, its
header names ``str``, its timestamp milliseconds or None."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

Header = tuple[str, bytes | None]


class Partition(NamedTuple):
    """One partition of a topic (a plain tuple: it compares and hashes as ``(topic, partition)``)."""

    topic: str
    partition: int


@dataclass(frozen=True)
class Record:
    """One record as fetched."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None  # None: the record has none
    key: bytes | None
    value: bytes | None  # None: a tombstone
    headers: tuple[Header, ...] = ()

    @property
    def topic_partition(self) -> Partition:
        return Partition(self.topic, self.partition)


@dataclass(frozen=True)
class UnreadableRecord:
    """In place of a record the client cannot decode (e.g. a header name that is not UTF-8): where it was and why.
    Its bytes are not kept (nobody could read them); the consumer's position is already past it."""

    topic: str
    partition: int
    offset: int
    reason: str

    @property
    def topic_partition(self) -> Partition:
        return Partition(self.topic, self.partition)


@dataclass(frozen=True)
class OversizeRecord:
    """In place of a record in a batch too large to fetch (over ``max_message_bytes``): where it was and the
    batch's size. Its bytes were never read; the consumer's position is already past its batch."""

    topic: str
    partition: int
    offset: int
    size: int  # of its record batch, in bytes
    limit: int

    @property
    def topic_partition(self) -> Partition:
        return Partition(self.topic, self.partition)

    @property
    def reason(self) -> str:
        return (
            f"record at offset {self.offset} of {self.topic}/{self.partition} is in a batch of {self.size} bytes; "
            f"the largest accepted is {self.limit} (kafka.max_message_bytes)"
        )


def from_client(msg: object) -> Record:
    """A kafka-python ``ConsumerRecord`` (no deserializers: bytes as sent) as a :class:`Record`. On every record a
    reader fetches, so it fills the frozen dataclass's fields as its ``__init__`` would, without a call per field."""
    stamp = getattr(msg, "timestamp", None)
    headers = getattr(msg, "headers", None)
    key, value = msg.key, msg.value
    record = object.__new__(Record)
    record.__dict__.update(
        topic=msg.topic,
        partition=msg.partition,
        offset=msg.offset,
        timestamp_ms=stamp if isinstance(stamp, int) and stamp >= 0 else None,
        key=None if key is None else bytes(key),
        value=None if value is None else bytes(value),
        headers=tuple((str(k), None if v is None else bytes(v)) for k, v in headers) if headers else (),
    )
    return record


def from_batch(topic: str, partition: int, data: bytes, start: int) -> list[Record]:
    """The records of one record batch (bytes as fetched) at or after offset ``start``; ValueError if one of them
    does not decode (as kafka-python's consumer, which cannot read such a record either)."""
    from kafka.errors import CorruptRecordError
    from kafka.record import MemoryRecords

    try:
        batch = MemoryRecords(data).next_batch()
        control = getattr(batch, "is_control_batch", False)  # transaction markers: no records to hand out
        messages = [] if control else [m for m in batch or () if m.offset >= start]
    except CorruptRecordError as exc:
        raise ValueError(str(exc)) from exc
    return [
        Record(
            topic=topic,
            partition=partition,
            offset=m.offset,
            timestamp_ms=m.timestamp if isinstance(m.timestamp, int) and m.timestamp >= 0 else None,
            key=m.key,
            value=m.value,
            headers=tuple((str(k), v) for k, v in m.headers),
        )
        for m in messages
    ]
