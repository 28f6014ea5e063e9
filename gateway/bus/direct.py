"""Reading a partition's batches on a socket of its own (:func:`gateway.bus.oversize.fetch_batch`), apart from the
client: for a partition the client cannot move on (:mod:`gateway.bus.stalls`) and for records the client skipped
without handing them out (:meth:`gateway.bus.consumer.Consumer.poll` checks every partition's offsets follow on).

A batch within ``max_message_bytes`` is read and its records handed out; one over it is never read, and its
records come as :class:`~gateway.bus.records.OversizeRecord`; one that does not decode, as
:class:`~gateway.bus.records.UnreadableRecord`. It reads one private field of kafka-python's consumer,
``_client.cluster`` (a partition's leader and its address). It speaks plain TCP or TLS; behind SASL it cannot
authenticate, and reads nothing."""

from __future__ import annotations

import logging
import ssl

from gateway.bus import clients
from gateway.bus.errors import BusError
from gateway.bus.oversize import Batch, NoBatch, fetch_batch
from gateway.bus.records import OversizeRecord, Partition, Record, UnreadableRecord, from_batch
from gateway.core.kafka_settings import KafkaSettings

log = logging.getLogger("lastmile.bus")
Fetched = Record | UnreadableRecord | OversizeRecord
MAX_GAP_BATCHES = 64  # batches read apart to fill one gap at most; the rest the next poll finds again


class DirectReader:
    def __init__(self, settings: KafkaSettings) -> None:
        self.settings = settings
        self._tls = tls_context(settings)

    def batch(self, client, p: Partition, offset: int) -> Batch | None:
        """The batch at ``offset``, asked of the partition's leader; None if it cannot be."""
        found = self.probe(client, p, offset)
        return found if isinstance(found, Batch) else None

    def probe(self, client, p: Partition, offset: int) -> Batch | int | None:
        """The batch at ``offset``; else the leader's high watermark where it answered that it holds none there;
        None where it could not be asked (behind SASL, no leader known, a failed socket)."""
        if self.settings.security_protocol.startswith("SASL"):
            log.error("%s/%s at offset %s: batches cannot be read apart with SASL", *p, offset)
            return None
        try:
            host, port = leader_address(client, p)
            limit, timeout_s = self.settings.max_message_bytes, self.settings.probe_timeout_ms / 1000
            return fetch_batch(host, port, *p, offset, limit, timeout_s, self._tls)
        except NoBatch as exc:
            log.warning("could not read %s/%s at offset %s apart: %s", *p, offset, exc)
            return exc.end
        except (BusError, OSError) as exc:
            log.warning("could not read %s/%s at offset %s apart: %s", *p, offset, exc)
            return None

    def records(self, p: Partition, offset: int, batch: Batch) -> list[Fetched]:
        """The batch's records from ``offset`` on: read, or (over the limit, or undecodable) by reference."""
        first, last = max(offset, batch.first_offset), batch.last_offset
        if batch.data is None:
            log.error("passing an oversize batch at offset %s of %s/%s: %s bytes", offset, *p, batch.size)
            limit = self.settings.max_message_bytes
            return [OversizeRecord(*p, o, batch.size, limit) for o in range(first, last + 1)]
        try:
            return list(from_batch(*p, batch.data, offset))
        except (ValueError, IndexError) as exc:  # as the client: a record it cannot decode is refused, not raised
            reason = f"unreadable record batch at offset {first} of {p.topic}/{p.partition}: {exc}"
            return [UnreadableRecord(*p, o, reason) for o in range(first, last + 1)]

    def between(self, client, p: Partition, start: int, stop: int) -> list[Fetched] | None:
        """The records from ``start`` up to (not including) ``stop``; None if they cannot be read."""
        out: list[Fetched] = []
        offset = start
        for _ in range(MAX_GAP_BATCHES):
            if offset >= stop:
                break
            batch = self.batch(client, p, offset)
            if batch is None:
                return None
            if batch.first_offset >= stop:  # nothing stored there (compacted, or transaction markers)
                break
            out += [r for r in self.records(p, offset, batch) if r.offset < stop]
            offset = batch.last_offset + 1
        return out


def leader_address(client, p: Partition) -> tuple[str, int]:
    cluster = client._client.cluster  # kafka-python keeps its metadata there; no public accessor
    node = cluster.leader_for_partition(clients.to_client(p))
    broker = cluster.broker_metadata(node) if node is not None and node >= 0 else None
    if broker is None:
        raise BusError(f"no known leader for {p.topic}/{p.partition}")
    return broker.host, broker.port


def tls_context(settings: KafkaSettings) -> ssl.SSLContext | None:
    if settings.security_protocol in ("SSL", "SASL_SSL"):
        return ssl.create_default_context(cafile=settings.ssl_cafile)
    return None
