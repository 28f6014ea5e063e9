"""Batches read apart from the client, for a partition it cannot move on (:mod:`gateway.bus.stalls`): one over
``max_message_bytes`` is never read and its records come as :class:`~gateway.bus.records.OversizeRecord`; one
within it is read (:func:`gateway.bus.oversize.fetch_batch`) and decoded by kafka-python's record decoder, every
codec included; one that does not decode comes as :class:`~gateway.bus.records.UnreadableRecord`s.

Plain TCP or TLS (the settings' CA, client certificate and key); behind SASL it cannot authenticate, and reads
nothing."""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable

from gateway.bus.errors import BusError
from gateway.bus.oversize import Batch, NoBatch, fetch_batch
from gateway.bus.records import Fetched, OversizeRecord, Partition, Record, UnreadableRecord
from gateway.core.kafka_settings import KafkaSettings

log = logging.getLogger("lastmile.bus")
MAX_GAP_BATCHES = 64  # batches read apart to fill one gap at most; the rest the next poll finds again
Leader = Callable[[Partition], tuple[str, int]]  # a partition's leader's address (raises BusError if unknown)


class DirectReader:
    def __init__(self, settings: KafkaSettings, leader: Leader) -> None:
        self.settings, self.leader = settings, leader
        self._tls = tls_context(settings)

    def probe(self, p: Partition, offset: int) -> Batch | int | None:
        """The batch at ``offset``; else the leader's high watermark where it answered that it holds none there;
        None where it could not be asked (behind SASL, no leader known, a failed socket)."""
        if self.settings.security_protocol.startswith("SASL"):
            log.error("%s/%s at offset %s: batches cannot be read apart with SASL", *p, offset)
            return None
        try:
            limit, timeout_s = self.settings.max_message_bytes, self.settings.probe_timeout_ms / 1000
            return fetch_batch(self.leader(p), *p, offset, limit, timeout_s, self._tls)
        except NoBatch as exc:  # its end, most likely: idle, not stuck
            log.debug("nothing to read of %s/%s at offset %s apart: %s", *p, offset, exc)
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
            return list(decode(*p, batch.data, offset))
        except (ValueError, IndexError) as exc:  # as a client: a record it cannot decode is refused, not raised
            reason = f"unreadable record batch at offset {first} of {p.topic}/{p.partition}: {exc}"
            return [UnreadableRecord(*p, o, reason) for o in range(first, last + 1)]

    def between(self, p: Partition, start: int, stop: int) -> list[Fetched] | None:
        """The records from ``start`` up to (not including) ``stop``; None if they cannot be read."""
        out: list[Fetched] = []
        offset = start
        for _ in range(MAX_GAP_BATCHES):
            if offset >= stop:
                break
            found = self.probe(p, offset)
            if not isinstance(found, Batch):
                return None
            if found.first_offset >= stop:  # nothing stored there (compacted, or transaction markers)
                break
            out += [r for r in self.records(p, offset, found) if r.offset < stop]
            offset = found.last_offset + 1
        return out


def decode(topic: str, partition: int, data: bytes, start: int) -> list[Record]:
    """The records of one record batch (bytes as fetched) at or after offset ``start``, by kafka-python's
    decoder; ValueError if one of them does not decode (its codec's library missing, a header name not UTF-8)."""
    from kafka.errors import KafkaError
    from kafka.record import MemoryRecords

    try:
        batch = MemoryRecords(data).next_batch()
        control = getattr(batch, "is_control_batch", False)  # transaction markers: no records to hand out
        messages = [] if control else [m for m in batch or () if m.offset >= start]
    except (KafkaError, UnicodeDecodeError) as exc:
        raise ValueError(str(exc)) from exc
    return [
        Record(
            topic,
            partition,
            m.offset,
            m.timestamp if isinstance(m.timestamp, int) and m.timestamp >= 0 else None,
            m.key,
            m.value,
            tuple((str(k), v) for k, v in m.headers),
        )
        for m in messages
    ]


def tls_context(settings: KafkaSettings) -> ssl.SSLContext | None:
    """The settings' TLS: their CA, and their client certificate and key when given."""
    if settings.security_protocol not in ("SSL", "SASL_SSL"):
        return None
    context = ssl.create_default_context(cafile=settings.ssl_cafile)
    if settings.ssl_certfile:
        password = settings.secret("ssl_key_password")
        context.load_cert_chain(settings.ssl_certfile, settings.ssl_keyfile, password)
    return context
