"""The bus's plain types: a partition, a record as fetched, a view of a readable record (its fields by method call),
and a record the client could not decode. Nothing of a client's leaks through them: a record's key, value and
header values are ``bytes`` or None, its header names ``str``, its timestamp milliseconds or None."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Protocol

Header = tuple[str, bytes | None]
FIELDS = ("topic", "partition", "offset", "timestamp_ms", "key", "value", "headers")


class Partition(NamedTuple):
    """One partition of a topic (a plain tuple: it compares and hashes as ``(topic, partition)``)."""

    topic: str
    partition: int


class Record:
    """One record as fetched; it compares, hashes and prints as the tuple of its fields. An engine may hand out a
    subclass that reads them from its client's message only when asked."""

    __slots__ = FIELDS
    topic: str
    partition: int
    offset: int
    # None: the record has none
    timestamp_ms: int | None
    key: bytes | None
    # None: a tombstone
    value: bytes | None
    headers: tuple[Header, ...]

    def __init__(self, topic, partition, offset, timestamp_ms, key, value, headers: tuple[Header, ...] = ()) -> None:
        self.topic, self.partition, self.offset, self.timestamp_ms = topic, partition, offset, timestamp_ms
        self.key, self.value, self.headers = key, value, headers

    @property
    def topic_partition(self) -> Partition:
        return Partition(self.topic, self.partition)

    def fields(self) -> tuple:
        return tuple(getattr(self, name) for name in FIELDS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Record) and self.fields() == other.fields()

    def __hash__(self) -> int:
        return hash(self.fields())

    def __repr__(self) -> str:
        return "Record(" + ", ".join(f"{n}={v!r}" for n, v in zip(FIELDS, self.fields(), strict=True)) + ")"


@dataclass(frozen=True)
class UnreadableRecord:
    """In place of a record the client cannot decode (e.g. a header name that is not UTF-8): where it was and why;
    the consumer's position is already past it."""

    topic: str
    partition: int
    offset: int
    reason: str

    @property
    def topic_partition(self) -> Partition:
        return Partition(self.topic, self.partition)


Fetched = Record | UnreadableRecord


def partitions_of(tps) -> list[Partition]:
    """A client's topic-partitions (either client's: ``.topic``, ``.partition``) as ours."""
    return [Partition(tp.topic, tp.partition) for tp in tps]


class MessageView(Protocol):
    """A readable record as :meth:`~gateway.bus.Consumer.poll_views` hands it out, read by method calls (no key,
    no headers): librdkafka's messages have these methods, so they are handed out as they come."""

    def topic(self) -> str: ...

    def partition(self) -> int: ...

    def offset(self) -> int: ...

    def timestamp(self) -> tuple[int, int]:
        """``(kind, milliseconds)``: kind 0 (and -1 ms) where the record has no timestamp."""
        ...

    def value(self) -> bytes | None: ...


class RecordView:
    """A :class:`Record` as a :class:`MessageView`."""

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
    """A ``(kind, milliseconds)`` timestamp as milliseconds; None where the record has none (kind 0, or < 0)."""
    kind, stamp = timestamp
    return stamp if kind and stamp >= 0 else None


class Polled(NamedTuple):
    """What :meth:`~gateway.bus.Consumer.poll_views` hands out: the readable records as views, and the ones passed
    on unread."""

    views: list[MessageView]
    passed_on: list[UnreadableRecord]
