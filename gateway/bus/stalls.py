"""Partitions that should move and do not: found, named, and moved on by reading their next batch directly.

A partition *stalls* when it is assigned, not paused, has records after its position, and its position has not
moved for a while. :class:`Watch` keeps, per such partition, its position and when it last moved, and asks the
broker for its end only once the position has stood still for ``kafka.stall_check_s`` (an idle partition costs
one request per period). It reports stalls (for readiness: which partition, at which offset, for how long), and
fetches the one batch at a stalled position on a socket of its own (:mod:`gateway.bus.oversize`):

- over ``max_message_bytes`` (no client could fetch it): with ``oversize_records: dead_letter`` it seeks past the
  batch and hands back one :class:`~gateway.bus.records.OversizeRecord` per record, never reading their bytes;
  with ``stop`` the partition stays stuck and readiness says where;
- within it (the client is stuck behind a larger batch in the same reply, or its fetches fail): it hands back the
  batch's records, read and bounded by the limit, and seeks past them.

It reads one private field of kafka-python's consumer, ``_client.cluster`` (the partition's leader and its address);
positions and ends come through the public API. The probe speaks plain TCP or TLS; behind SASL it cannot
authenticate, so there a stall is reported (and readiness fails) but nothing is passed.
"""

from __future__ import annotations

import logging
import ssl
import time
from dataclasses import dataclass

from gateway.bus import clients
from gateway.bus.errors import BusError, mapped
from gateway.bus.oversize import Batch, fetch_batch
from gateway.bus.records import OversizeRecord, Partition, Record, UnreadableRecord, from_batch
from gateway.core.config import KafkaSettings

log = logging.getLogger("lastmile.bus")
Fetched = Record | UnreadableRecord | OversizeRecord


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
    def __init__(self, settings: KafkaSettings) -> None:
        self.settings = settings
        self._seen: dict[Partition, _Seen] = {}
        self._tls = _tls(settings)

    def observe(self, client, now: float | None = None) -> list[Fetched]:
        """After a poll: note every active partition's position; check the ones standing still; pass (and return)
        an oversize batch found at a stalled position."""
        now = time.monotonic() if now is None else now
        with mapped():
            active = {Partition(tp.topic, tp.partition): tp for tp in client.assignment() - client.paused()}
            for p in set(self._seen) - set(active):  # paused or revoked: its clock restarts when it is back
                del self._seen[p]
            out: list[Fetched] = []
            for p, tp in active.items():
                offset = client.position(tp, timeout_ms=0)
                if offset is not None:
                    out += self._note(client, p, tp, offset, now)
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
        if now - seen.checked < self.settings.stall_check_s:
            return []
        seen.checked = now
        try:
            with mapped():
                end: int | None = client.end_offsets([tp], timeout_ms=self.settings.probe_timeout_ms)[tp]
        except BusError:  # the connection fails, an oversize reply on it perhaps: the probe asks the leader
            end = None
        if end is not None and end <= offset:  # at its end: idle, not stalled
            seen.behind, seen.since = 0, now
            return []
        batch = self._probe(client, p, offset)
        seen.behind = (end if end is not None else batch.end if batch is not None else offset + 1) - offset
        if batch is None:
            return []
        if batch.data is None and self.settings.oversize_records != "dead_letter":
            log.error("%s/%s stuck at offset %s: a batch of %s bytes (oversize_records: stop)", *p, offset, batch.size)
            return []
        client.seek(tp, batch.last_offset + 1)
        del self._seen[p]
        return self._records(p, offset, batch)

    def _records(self, p: Partition, offset: int, batch: Batch) -> list[Fetched]:
        """The batch's records from ``offset`` on: read, or (over the limit, or undecodable) by reference."""
        first, last = max(offset, batch.first_offset), batch.last_offset
        if batch.data is None:
            log.error("passing an oversize batch at offset %s of %s/%s: %s bytes", offset, *p, batch.size)
            limit = self.settings.max_message_bytes
            return [OversizeRecord(*p, o, batch.size, limit) for o in range(first, last + 1)]
        log.warning("read the batch at offset %s of %s/%s on its own: the consumer did not move", offset, *p)
        try:
            return list(from_batch(*p, batch.data, offset))
        except (ValueError, IndexError) as exc:  # as the client: a record it cannot decode is refused, not raised
            reason = f"unreadable record batch at offset {first} of {p.topic}/{p.partition}: {exc}"
            return [UnreadableRecord(*p, o, reason) for o in range(first, last + 1)]

    def _probe(self, client, p: Partition, offset: int) -> Batch | None:
        """The batch at ``offset``, asked of the partition's leader on a socket of its own; None if it cannot be."""
        if self.settings.security_protocol.startswith("SASL"):
            log.error("%s/%s is stuck at offset %s; the oversize probe cannot authenticate with SASL", *p, offset)
            return None
        try:
            host, port = _leader(client, p)
            limit, timeout_s = self.settings.max_message_bytes, self.settings.probe_timeout_ms / 1000
            return fetch_batch(host, port, *p, offset, limit, timeout_s, self._tls)
        except (BusError, OSError) as exc:
            log.warning("could not probe %s/%s at offset %s: %s", *p, offset, exc)
            return None


def _leader(client, p: Partition) -> tuple[str, int]:
    cluster = client._client.cluster  # kafka-python keeps its metadata there; no public accessor
    node = cluster.leader_for_partition(clients.to_client(p))
    broker = cluster.broker_metadata(node) if node is not None and node >= 0 else None
    if broker is None:
        raise BusError(f"no known leader for {p.topic}/{p.partition}")
    return broker.host, broker.port


def _tls(settings: KafkaSettings) -> ssl.SSLContext | None:
    if settings.security_protocol in ("SSL", "SASL_SSL"):
        return ssl.create_default_context(cafile=settings.ssl_cafile)
    return None
