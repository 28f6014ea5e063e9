"""Records written fast, for loading a topic before a benchmark: record batches (magic 2) built here and sent in
Produce v3 requests on a socket of its own, one partition at a time.

kafka-python's producer spends about 250 µs of Python per record (partitioner, accumulator, futures): a million
videos' 24 million score events would take the better part of two hours to load. Here a record costs a few
byte concatenations and a batch one CRC32C in C. Not for the service's own output: no retries, no idempotence,
``acks`` 1; a broker's error code is raised.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterable

from crc32c import crc32c

from gateway.bus.errors import BusError
from gateway.bus.wire import WireReader

PRODUCE, PRODUCE_VERSION = 0, 3  # Produce v3: record batches (magic 2), no flexible fields
ACKS, TIMEOUT_MS = 1, 30_000
BATCH_BYTES = 512 * 1024  # a request's records stay under a broker's default 1 MiB message.max.bytes
_SMALL = [bytes([2 * i]) if 2 * i < 128 else bytes([(2 * i & 0x7F) | 0x80, 2 * i >> 7]) for i in range(8192)]


class LoadError(BusError):
    """The broker refused a batch (its error code) or hung up."""


def zigzag_varint(n: int) -> bytes:
    """A non-negative int as Kafka's zigzag varint (records' lengths and deltas)."""
    if n < len(_SMALL):
        return _SMALL[n]
    z, out = n << 1, bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def record_batch(records: list[tuple[bytes, bytes]], timestamp_ms: int) -> bytes:
    """One uncompressed record batch of (key, value) pairs, all stamped ``timestamp_ms``, offsets from 0."""
    v = zigzag_varint
    framed = (b"\x00\x00" + v(i) + v(len(k)) + k + v(len(val)) + val + b"\x00" for i, (k, val) in enumerate(records))
    body = b"".join(v(len(record)) + record for record in framed)  # attributes, timestamp delta 0, ..., no headers
    # attributes, last offset delta, first and max timestamp, producer id and epoch, base sequence, count
    tail = struct.pack(">hiqqqhii", 0, len(records) - 1, timestamp_ms, timestamp_ms, -1, -1, -1, len(records)) + body
    return struct.pack(">qiibI", 0, 9 + len(tail), -1, 2, crc32c(tail)) + tail


class Loader:
    """A socket to one broker (the partitions' leader: a single local broker) that appends batches."""

    def __init__(self, bootstrap: str, timeout_s: float = 60.0, batch_bytes: int = BATCH_BYTES) -> None:
        self.batch_bytes = batch_bytes
        host, _, port = bootstrap.rpartition(":")
        self.conn = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.correlation = 0

    def __enter__(self) -> Loader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def load(self, topic: str, records: Iterable[tuple[int, bytes, bytes]], timestamp_ms: int) -> int:
        """Append (partition, key, value) records in their order per partition, in batches of at most
        ``batch_bytes`` of keys and values; returns how many were appended."""
        pending: dict[int, list[tuple[bytes, bytes]]] = {}
        size: dict[int, int] = {}
        count = 0
        for partition, key, value in records:
            run = pending.setdefault(partition, [])
            if run and size[partition] + len(key) + len(value) > self.batch_bytes:
                count += self._send(topic, partition, run, timestamp_ms)
                run, size[partition] = pending.setdefault(partition, []), 0
            run.append((key, value))
            size[partition] = size.get(partition, 0) + len(key) + len(value)
        for partition, run in pending.items():
            if run:
                count += self._send(topic, partition, run, timestamp_ms)
        return count

    def _send(self, topic: str, partition: int, run: list[tuple[bytes, bytes]], timestamp_ms: int) -> int:
        self.append(topic, partition, record_batch(run, timestamp_ms))
        n = len(run)
        run.clear()
        return n

    def append(self, topic: str, partition: int, batch: bytes) -> int:
        """Append one record batch; returns the offset the broker gave its first record."""
        self.correlation += 1
        name = topic.encode()
        body = (
            struct.pack(">hhih", PRODUCE, PRODUCE_VERSION, self.correlation, -1)  # header v1, no client id
            + struct.pack(">hhii", -1, ACKS, TIMEOUT_MS, 1)  # no transaction, acks, timeout, one topic
            + struct.pack(">h", len(name))
            + name
            + struct.pack(">iii", 1, partition, len(batch))
            + batch
        )
        self.conn.sendall(struct.pack(">i", len(body)) + body)
        reply = WireReader(self.conn, LoadError, "broker").reply()
        (correlation,) = struct.unpack_from(">i", reply)
        name_len = struct.unpack_from(">h", reply, 8)[0]  # after the correlation id and the topics' count
        _, error, base_offset = struct.unpack_from(">ihq", reply, 10 + name_len + 4)
        if correlation != self.correlation or error:
            raise LoadError(f"the broker refused a batch for {topic}[{partition}]: error code {error}")
        return base_offset
