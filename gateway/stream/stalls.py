"""Partitions that should move and do not, found and named for readiness (:mod:`gateway.stream.progress`).

A partition *stalls* when it is assigned, not paused, has records after its position, and its position has not
moved for a while. :class:`Watch`, told after each poll, keeps each active partition's position and since when it
has stood there. Once
one has stood still for ``kafka.stall_check_s`` it needs the partition's end: the client's own where the client
knows it (librdkafka's statistics), else asked of the broker, for all such partitions in one request that waits
``probe_timeout_ms`` at most, since the watch runs inside the poll loop. A broker that leaves it unanswered is not
asked again for ``stall_check_s``. The watch moves no position: a stalled partition stays where it is, and its
stall says why where the client can tell (a batch over ``kafka.max_message_bytes``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

from gateway.bus import BusError, NoAnswer, Partition
from gateway.core.kafka_settings import KafkaSettings

log = logging.getLogger("lastmile.bus")
# how often, within stall_check_s, the positions are noted (a move is seen within a tenth of it)
NOTES_PER_CHECK = 10


class Consumer(Protocol):
    """What the watch asks of a consumer (:class:`gateway.bus.Consumer`, either engine)."""

    def assignment(self) -> set[Partition]: ...

    def paused(self) -> set[Partition]: ...

    def position(self, partition: Partition) -> int: ...

    def known_end(self, partition: Partition, since: float) -> int | None: ...

    def end_offsets(self, partitions: Iterable[Partition], timeout_ms: int | None = None) -> dict[Partition, int]: ...


@dataclass(frozen=True)
class Stall:
    """A partition with records to read whose position has not moved for ``for_s`` seconds; ``cause``: why, where
    the client said."""

    partition: Partition
    offset: int
    # records after the position, when last asked
    behind: int
    for_s: float
    cause: str = ""

    def __str__(self) -> str:
        return (
            f"{self.partition.topic}/{self.partition.partition} stuck at offset {self.offset} for "
            f"{self.for_s:.0f} s with {self.behind} records behind it" + (f": {self.cause}" if self.cause else "")
        )


@dataclass
class _Seen:
    offset: int
    # when the position last moved (or the partition came back from a pause)
    since: float
    # when its end was last judged
    checked: float
    behind: int = 0


class Watch:
    def __init__(self, settings: KafkaSettings, clock: Callable[[], float] = time.monotonic) -> None:
        self.settings, self.clock = settings, clock
        self._seen: dict[Partition, _Seen] = {}
        self._unanswered_until = float("-inf")
        self._noted_at = float("-inf")

    def observe(self, consumer: Consumer, now: float | None = None) -> None:
        """After a poll: note every active partition's position, and judge the ones standing still. Positions are
        noted at most :data:`NOTES_PER_CHECK` times per ``stall_check_s``: asking for every partition's position
        after each poll cost a reader of hundreds of thousands of records a second a fifth of its CPU."""
        now = self.clock() if now is None else now
        if now - self._noted_at < self.settings.stall_check_s / NOTES_PER_CHECK:
            return
        self._noted_at = now
        try:
            due = self._note(consumer, now)
            if due:
                self._judge(consumer, due, now)
        except BusError as exc:
            # e.g. a fetch error met as the client's loop ran: the next poll meets it again
            log.warning("watching positions: %s", exc)

    def _note(self, consumer: Consumer, now: float) -> list[Partition]:
        """Note each active partition's position; the ones unmoved for ``stall_check_s`` are due a judgement."""
        active = consumer.assignment() - consumer.paused()
        # paused or revoked: its clock restarts when it is back
        for p in set(self._seen) - active:
            del self._seen[p]
        due = []
        for p in sorted(active):
            offset, seen = consumer.position(p), self._seen.get(p)
            if seen is None or seen.offset != offset:
                self._seen[p] = _Seen(offset, now, now)
            elif now - seen.checked >= self.settings.stall_check_s and self.clock() >= self._unanswered_until:
                seen.checked = now
                due.append(p)
        return due

    def _judge(self, consumer: Consumer, due: list[Partition], now: float) -> None:
        ends = {p: consumer.known_end(p, self._seen[p].since) for p in due}
        unknown = [p for p, end in ends.items() if end is None]
        if unknown:
            try:
                ends.update(consumer.end_offsets(unknown, timeout_ms=self.settings.probe_timeout_ms))
            except NoAnswer:
                # a frozen broker: asked again each round, it would hold the poll loop each time
                self._unanswered_until = self.clock() + self.settings.stall_check_s
                return
        for p in due:
            seen, end = self._seen[p], ends.get(p)
            if end is not None:
                seen.behind = max(0, end - seen.offset)
                if not seen.behind:
                    seen.since = now

    def stalls(self, after_s: float, cause: Callable[[float], str], now: float | None = None) -> list[Stall]:
        """Partitions behind their end whose position has not moved for ``after_s`` seconds or more; ``cause``:
        why one unmoved since a time stands, as its client tells."""
        now = self.clock() if now is None else now
        return [
            Stall(p, s.offset, s.behind, now - s.since, cause(s.since))
            for p, s in sorted(self._seen.items())
            if s.behind > 0 and now - s.since >= after_s
        ]
