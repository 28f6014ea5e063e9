"""Partitions that should move and do not: found, named, and moved on by reading their next batch directly.

A partition *stalls* when it is assigned, not paused, has records after its position, and its position has not
moved for a while. :class:`Watch` keeps, per such partition, its position and when it last moved, and asks the
broker for its end only once the position has stood still for ``kafka.stall_check_s`` (an idle partition costs
one request per period). It reports stalls (for readiness: which partition, at which offset, for how long), and
fetches the one batch at a stalled position on a socket of its own (:mod:`gateway.bus.oversize`):

- over ``max_message_bytes`` (no client could fetch it): with ``oversize_records: dead_letter`` it seeks past the
  batch and hands back one :class:`~gateway.bus.records.OversizeRecord` per record, never reading their bytes;
  with ``stop`` the partition stays stuck and readiness says where;
- within it, once a fetch of the client's failed on a reply over its limit since the partition stopped (Tansu
  puts the next batch in a reply whatever its size, so a small batch before an oversize one stops too): it hands
  back the batch's records, read and bounded by the limit, and seeks past them. Otherwise a small batch is left
  to the client (it may hold it fetched already). kafka-python tells of a failed fetch only in its log, so the
  watch reads the ``kafka.consumer.fetcher`` logger's records (which must stay enabled at ERROR).

Batches are read apart by :class:`~gateway.bus.direct.DirectReader` (plain TCP or TLS; behind SASL it cannot
authenticate, so there a stall is reported, and readiness fails, but nothing is passed). Positions and ends come
through the client's public API.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from gateway.bus.direct import DirectReader, Fetched
from gateway.bus.errors import BusError, mapped
from gateway.bus.oversize import Batch
from gateway.bus.records import Partition
from gateway.core.kafka_settings import KafkaSettings

log = logging.getLogger("lastmile.bus")


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


class _FetchFailures(logging.Filter):
    """kafka-python tells of a failed fetch only in its log (``Fetch to node %s failed: %s``): note when one failed
    on a reply over the client's ``receive_message_max_bytes`` (an oversize batch in it). Passes every record."""

    def __init__(self) -> None:
        super().__init__()
        self.last_oversize = float("-inf")  # time.monotonic() of the latest

    def filter(self, record: logging.LogRecord) -> bool:
        from kafka.errors import InvalidReceiveError

        args = record.args if isinstance(record.args, tuple) else ()
        if len(args) == 2 and isinstance(args[1], InvalidReceiveError):
            self.last_oversize = time.monotonic()
        return True


FETCH_FAILURES = _FetchFailures()
FETCHER_LOG = "kafka.consumer.fetcher"


class Watch:
    def __init__(self, settings: KafkaSettings) -> None:
        if FETCH_FAILURES not in logging.getLogger(FETCHER_LOG).filters:
            logging.getLogger(FETCHER_LOG).addFilter(FETCH_FAILURES)
        self.settings = settings
        self._seen: dict[Partition, _Seen] = {}
        self.direct = DirectReader(settings)
        self._unanswered_until = float("-inf")  # a broker that answered neither way: no check before then

    def observe(self, client, now: float | None = None) -> list[Fetched]:
        """After a poll: note every active partition's position; check the ones standing still; pass (and return)
        an oversize batch found at a stalled position."""
        now = time.monotonic() if now is None else now
        out: list[Fetched] = []
        try:
            with mapped():
                active = {Partition(tp.topic, tp.partition): tp for tp in client.assignment() - client.paused()}
                for p in set(self._seen) - set(active):  # paused or revoked: its clock restarts when it is back
                    del self._seen[p]
                for p, tp in active.items():
                    offset = client.position(tp, timeout_ms=0)  # (it may run the client's network loop)
                    if offset is not None:
                        out += self._note(client, p, tp, offset, now)
        except BusError as exc:  # e.g. a fetch failing as the client's loop ran: the next poll meets it again
            log.warning("watching positions: %s", exc)
        return out

    def stalls(self, after_s: float, now: float | None = None) -> list[Stall]:
        """Partitions behind their end whose position has not moved for ``after_s`` seconds or more."""
        now = time.monotonic() if now is None else now
        return [
            Stall(p, s.offset, s.behind, now - s.since)
            for p, s in sorted(self._seen.items())
            if s.behind > 0 and now - s.since >= after_s
        ]

    def _note(self, client, p: Partition, tp, offset: int, now: float) -> list[Fetched]:
        seen = self._seen.get(p)
        if seen is None or seen.offset != offset:
            self._seen[p] = _Seen(offset, now, now)
            return []
        if now - seen.checked < self.settings.stall_check_s or time.monotonic() < self._unanswered_until:
            return []
        seen.checked = now
        try:
            with mapped():
                end: int | None = client.end_offsets([tp], timeout_ms=self.settings.probe_timeout_ms)[tp]
        except BusError as exc:  # the connection fails, an oversize reply on it perhaps: the probe asks the leader
            if _timed_out(exc):  # no answer at all: reading apart would wait as long, and the broker probe tells
                self._unanswered_until = time.monotonic() + self.settings.stall_check_s
                return []
            end = None
        found = None if end is not None and end <= offset else self.direct.probe(client, p, offset)
        batch = found if isinstance(found, Batch) else None
        if end is None and isinstance(found, int):  # the leader holds no batch there: its end is the watermark
            end = found
        if end is not None and end <= offset:  # at its end: idle, not stalled
            seen.behind, seen.since = 0, now
            return []
        if end is None and batch is None:  # no answer either way: the other partitions' checks would wait as long
            self._unanswered_until = time.monotonic() + self.settings.stall_check_s
            seen.behind = max(seen.behind, 1)  # it may be stuck (behind SASL nothing else can tell): readiness says
            return []
        seen.behind = (end if end is not None else batch.end) - offset
        if batch is None or (batch.data is not None and FETCH_FAILURES.last_oversize < seen.since):
            return []  # within the limit, and no fetch of the client's failed on a larger reply: the client's to read
        if batch.data is None and self.settings.oversize_records != "dead_letter":
            log.error("%s/%s stuck at offset %s: a batch of %s bytes (oversize_records: stop)", *p, offset, batch.size)
            return []
        client.seek(tp, batch.last_offset + 1)
        del self._seen[p]
        if batch.data is not None:
            log.warning("read the batch at offset %s of %s/%s apart: the consumer did not move", offset, *p)
        return self.direct.records(p, offset, batch)


def _timed_out(exc: BusError) -> bool:
    """Whether the client's request went unanswered (a frozen or overloaded broker), not refused or cut."""
    from kafka.errors import KafkaTimeoutError, RequestTimedOutError

    return isinstance(exc.__cause__, KafkaTimeoutError | RequestTimedOutError)
