"""Partitions that should move and do not: found, named, and moved on by reading their next batch directly.

A partition *stalls* when it is assigned, not paused, has records after its position, and its position has not
moved for a while. :class:`Watch` keeps, per such partition, its position and when it last moved, and asks the
broker for its end only once the position has stood still for ``kafka.stall_check_s`` (an idle partition costs
one request per period). It reports stalls (for readiness: which partition, at which offset, for how long), and
asks for the one batch at a stalled position on a socket of its own (:mod:`gateway.bus.apart`):

- over ``max_message_bytes`` (no client could fetch it): with ``oversize_records: dead_letter`` it seeks past the
  batch and hands back one :class:`~gateway.bus.records.OversizeRecord` per record, never reading their bytes;
  with ``stop`` the partition stays stuck and readiness says where;
- within it, once the client has refused a reply over its limit since the partition stopped (Tansu puts the next
  batch in a reply whatever its size, so a small batch before an oversize one stops too): it hands back the
  batch's records, read and bounded by the limit, and seeks past them. Otherwise a small batch is left to the
  client (it may hold it fetched already). The client says so itself: librdkafka through its error callback
  (:mod:`gateway.bus.librdkafka.health`), kafka-python in its fetcher's log (:mod:`gateway.bus.kafka_python`).

Positions, ends and seeks go through the consumer's own methods, whichever engine it runs on. The watch runs inside
the poll loop, so it holds it as little as it can: each question waits ``probe_timeout_ms`` at most (a read apart:
that long to connect and for each read), and once a round has spent that long, ends included, it starts no
judgement; the partitions still due are judged after the next poll. A round can still take a few such waits (the
ends, then one partition's leader and read); the settings keep ``probe_timeout_ms`` at most half of
``max_poll_interval_ms``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from gateway.bus.apart import DirectReader
from gateway.bus.errors import BusError, NoAnswer
from gateway.bus.oversize import Batch
from gateway.bus.records import Fetched, Partition
from gateway.core.kafka_settings import KafkaSettings


class Consumer(Protocol):
    """What the watch asks of a consumer (:class:`gateway.bus.consumer.Consumer`, either engine)."""

    def assignment(self) -> set[Partition]: ...

    def paused(self) -> set[Partition]: ...

    def position(self, partition: Partition) -> int: ...

    def seek(self, partition: Partition, offset: int) -> None: ...

    def end_offsets(self, partitions: Iterable[Partition], timeout_ms: int | None = None) -> dict[Partition, int]: ...

    def last_oversize(self) -> float: ...


log = logging.getLogger("lastmile.bus")
NOTES_PER_CHECK = 10  # how often, within stall_check_s, the positions are noted (a move is seen within a tenth)


@dataclass(frozen=True)
class Stall:
    """A partition with records to read whose position has not moved for ``for_s`` seconds."""

    partition: Partition
    offset: int
    behind: int  # records after the position, when last asked
    for_s: float

    def __str__(self) -> str:
        return (
            f"{self.partition.topic}/{self.partition.partition} stuck at offset {self.offset} for "
            f"{self.for_s:.0f} s with {self.behind} records behind it"
        )


@dataclass
class _Seen:
    offset: int
    since: float  # when the position last moved (or the partition was resumed)
    checked: float  # when its end was last asked for
    behind: int = 0


class Watch:
    def __init__(
        self, settings: KafkaSettings, direct: DirectReader, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.settings, self.direct, self.clock = settings, direct, clock
        self._seen: dict[Partition, _Seen] = {}
        self._unanswered_until = float("-inf")  # a broker that answered neither way: no check before then
        self._starved = False  # the last round judged nothing for want of time: the next judges one whatever it costs
        self._noted_at = float("-inf")  # when the positions were last noted

    def observe(self, consumer: Consumer, now: float | None = None) -> list[Fetched]:
        """After a poll: note every active partition's position; check the ones standing still (their ends asked in
        one request); pass (and return) an oversize batch found at a stalled position. Positions are noted at most
        :data:`NOTES_PER_CHECK` times per ``stall_check_s``: asking the client for each partition's position after
        every poll cost a reader going through hundreds of thousands of records a second a fifth of its CPU."""
        now = self.clock() if now is None else now
        deferred = self._starved or any(s.checked == float("-inf") for s in self._seen.values())
        if not deferred and now - self._noted_at < self.settings.stall_check_s / NOTES_PER_CHECK:
            return []  # (a partition a slow round put off is judged after the next poll, as that round promised)
        self._noted_at = now
        due: list[Partition] = []
        try:
            active = consumer.assignment() - consumer.paused()
            for p in set(self._seen) - active:  # paused or revoked: its clock restarts when it is back
                del self._seen[p]
            for p in sorted(active):
                offset = consumer.position(p)
                seen = self._seen.get(p)
                if seen is None or seen.offset != offset:
                    self._seen[p] = _Seen(offset, now, now)
                elif now - seen.checked >= self.settings.stall_check_s and self.clock() >= self._unanswered_until:
                    seen.checked = now
                    due.append(p)
            if not due:
                return []
            round_until = self.clock() + self.settings.probe_timeout_ms / 1000  # this round's share of the poll
            try:
                ends: dict[Partition, int] = consumer.end_offsets(due, timeout_ms=self.settings.probe_timeout_ms)
            except BusError as exc:  # the connection fails, an oversize reply on it perhaps: the probe asks the leader
                if isinstance(exc, NoAnswer):  # no answer at all: reading apart would wait as long, and the broker
                    self._unanswered_until = self.clock() + self.settings.stall_check_s  # probe tells
                    return []
                ends = {}
            out: list[Fetched] = []
            for i, p in enumerate(due):
                if self.clock() < self._unanswered_until:  # a probe went unanswered: the rest would wait too
                    break
                if self.clock() >= round_until and not (i == 0 and self._starved):  # this round has waited its
                    for rest in due[i:]:  # share of the poll interval, the ends included: no judgement starts; the
                        self._seen[rest].checked = float("-inf")  # rest are judged after the next poll (one at
                    self._starved = i == 0  # least then, however slow the ends: a stall is never left forever)
                    break
                self._starved = False
                out += self._judge(consumer, p, self._seen[p], ends.get(p), now)
            return out
        except BusError as exc:  # e.g. a fetch failing as the client's loop ran: the next poll meets it again
            log.warning("watching positions: %s", exc)
            return []

    def stalls(self, after_s: float, now: float | None = None) -> list[Stall]:
        """Partitions behind their end whose position has not moved for ``after_s`` seconds or more."""
        now = self.clock() if now is None else now
        return [
            Stall(p, s.offset, s.behind, now - s.since)
            for p, s in sorted(self._seen.items())
            if s.behind > 0 and now - s.since >= after_s
        ]

    def _judge(self, consumer: Consumer, p: Partition, seen: _Seen, end: int | None, now: float) -> list[Fetched]:
        """A partition unmoved for ``stall_check_s``, its end as the broker answered (None: unknown)."""
        offset = seen.offset
        found = None if end is not None and end <= offset else self.direct.probe(p, offset)
        batch = found if isinstance(found, Batch) else None
        if end is None and isinstance(found, int):  # the leader holds no batch there: its end is the watermark
            end = found
        if end is not None and end <= offset:  # at its end: idle, not stalled
            seen.behind, seen.since = 0, now
            return []
        if end is None and batch is None:  # no answer either way: the other partitions' checks would wait as long
            self._unanswered_until = self.clock() + self.settings.stall_check_s
            seen.behind = max(seen.behind, 1)  # it may be stuck (behind SASL nothing else can tell): readiness says
            return []
        seen.behind = (end if end is not None else batch.end) - offset
        if batch is None or (batch.data is not None and consumer.last_oversize() < seen.since):
            return []  # within the limit, and no reply refused as too large: the client's to read
        if batch.data is None and self.settings.oversize_records != "dead_letter":
            log.error("%s/%s stuck at offset %s: a batch of %s bytes (oversize_records: stop)", *p, offset, batch.size)
            return []
        consumer.seek(p, batch.last_offset + 1)
        del self._seen[p]
        if batch.data is not None:
            log.warning("read the batch at offset %s of %s/%s apart: the consumer did not move", offset, *p)
        return self.direct.records(p, offset, batch)
