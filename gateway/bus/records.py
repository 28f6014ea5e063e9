"""The bus's plain types: a partition, a record as fetched (or a row of it), and a record the client could not
decode or fetch.
Nothing of a client's leaks through them: a fetched record's key, value and header values are ``bytes`` or None,
its header names ``str``, its timestamp milliseconds or None."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

Header = tuple[str, bytes | None]


class Partition(NamedTuple):
    """One partition of a topic (a plain tuple: it compares and hashes as ``(topic, partition)``)."""

    topic: str
    partition: int


class Record:
    """One record as fetched. Its fields compare, hash and print as a tuple of them; an engine may hand out a
    subclass that reads them from its client's message only when asked (a reader makes one per record, hundreds of
    thousands a second)."""

    __slots__ = ("headers", "key", "offset", "partition", "timestamp_ms", "topic", "value")
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None  # None: the record has none
    key: bytes | None
    value: bytes | None  # None: a tombstone
    headers: tuple[Header, ...]

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp_ms: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[Header, ...] = (),
    ) -> None:
        self.topic, self.partition, self.offset, self.timestamp_ms = topic, partition, offset, timestamp_ms
        self.key, self.value, self.headers = key, value, headers

    @property
    def topic_partition(self) -> Partition:
        return Partition(self.topic, self.partition)

    def fields(self) -> tuple:
        return (self.topic, self.partition, self.offset, self.timestamp_ms, self.key, self.value, self.headers)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and self.fields() == other.fields()

    def __hash__(self) -> int:
        return hash(self.fields())

    def __repr__(self) -> str:
        names = ("topic", "partition", "offset", "timestamp_ms", "key", "value", "headers")
        return "Record(" + ", ".join(f"{n}={v!r}" for n, v in zip(names, self.fields(), strict=True)) + ")"


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


Fetched = Record | UnreadableRecord | OversizeRecord


class Row(Protocol):
    """A readable record as :meth:`~gateway.bus.Consumer.poll_rows` hands it out: its topic, partition, offset,
    timestamp and value, each read by a method call when asked (no key, no headers). The methods are those of
    librdkafka's messages, so the default engine hands its messages out as they come, with no object made per record
    (a reader goes through hundreds of thousands a second); another engine wraps its records (:class:`RecordRow`)."""

    def topic(self) -> str: ...

    def partition(self) -> int: ...

    def offset(self) -> int: ...

    def timestamp(self) -> tuple[int, int]:
        """``(kind, milliseconds)``: kind 0 (and -1 ms) where the record has no timestamp."""
        ...

    def value(self) -> bytes | None: ...


class RecordRow:
    """A :class:`Record` as a :class:`Row`."""

    __slots__ = ("_r",)

    def __init__(self, record: Record) -> None:
        self._r = record

    def topic(self) -> str:
        return self._r.topic

    def partition(self) -> int:
        return self._r.partition

    def offset(self) -> int:
        return self._r.offset

    def timestamp(self) -> tuple[int, int]:
        stamp = self._r.timestamp_ms
        return (0, -1) if stamp is None else (1, stamp)

    def value(self) -> bytes | None:
        return self._r.value


def timestamp_ms(timestamp: tuple[int, int]) -> int | None:
    """A ``(kind, milliseconds)`` timestamp (librdkafka's, a :class:`Row`'s) as milliseconds; None where the record
    has none (kind 0, or a negative stamp)."""
    kind, stamp = timestamp
    return stamp if kind and stamp >= 0 else None


def row_fields(row: Row) -> tuple[str, int, int, int | None, bytes | None]:
    """A row's fields as a tuple ``(topic, partition, offset, timestamp_ms or None, value)``: to compare or print."""
    return (row.topic(), row.partition(), row.offset(), timestamp_ms(row.timestamp()), row.value())


class Polled(NamedTuple):
    """What :meth:`~gateway.bus.Consumer.poll_rows` hands out: the readable records as rows, in offset order per
    partition, and apart from them the records that could not be read (undecodable, or in a batch too large to
    fetch: each passed, as :meth:`~gateway.bus.Consumer.poll` passes them)."""

    rows: list[Row]
    skipped: list[UnreadableRecord | OversizeRecord]
