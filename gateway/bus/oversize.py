"""One record batch, fetched on a socket of its own: read whole when it is within the limit, described (size,
offsets) from its header alone when it is not.

A broker returns the first record batch at a fetch position whole, whatever the fetch size (KIP-74), and
kafka-python drops a connection whose response frame is over ``receive_message_max_bytes``, then asks again: one
oversize batch stops every partition fetched from that broker, silently. (Tansu also adds the next batch to a
reply whatever its size, so records *before* an oversize batch stop too.) :func:`fetch_batch` asks the
partition's leader for the one batch at a position (Fetch v4, ``max_bytes`` 1: the first batch only), and hangs
up after its header when it is over the limit, so no oversize payload is ever read.
"""

from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass

from gateway.bus.batches import LOG_OVERHEAD
from gateway.bus.errors import BusError
from gateway.bus.fetch_link import fetch_request
from gateway.bus.records import Partition
from gateway.bus.wire import WireReader

BATCH_HEADER = ">qiibIhi"  # base offset, length, leader epoch, magic, crc, attributes, last offset delta


@dataclass(frozen=True)
class Batch:
    """The record batch holding a partition's position: its offsets, its size in bytes on the wire, the
    partition's end (high watermark) as the leader told it, and its bytes when they were read."""

    first_offset: int
    last_offset: int
    size: int
    end: int
    data: bytes | None = None  # the batch as fetched; None: over the limit, not read


class ProbeError(BusError):
    """The leader did not describe the batch (an error code, no records, or a reply cut short)."""


class NoBatch(ProbeError):
    """The leader answered, and holds no batch at the offset: ``end`` is its high watermark then."""

    def __init__(self, message: str, end: int) -> None:
        super().__init__(message)
        self.end = end


def fetch_batch(
    host: str,
    port: int,
    topic: str,
    partition: int,
    offset: int,
    limit: int,
    timeout_s: float,
    tls: ssl.SSLContext | None = None,
) -> Batch:
    """The batch at ``offset`` of ``topic``/``partition`` from its leader at ``host``:``port`` (over TLS when
    ``tls`` is given): with its bytes when it is at most ``limit`` bytes, else its header alone."""
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        conn = tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw
        conn.sendall(fetch_request(1, {Partition(topic, partition): offset}, max_bytes=1, partition_bytes=1))
        r = WireReader(conn, ProbeError, "leader")
        r.take(">iii")  # frame length, correlation id, throttle time
        (n_topics,) = r.take(">i")
        if n_topics != 1:
            raise ProbeError(f"no record batch at offset {offset} of {topic}/{partition} (an empty reply)")
        (name_len,) = r.take(">h")
        r.raw(name_len)
        (n_parts,) = r.take(">i")
        if n_parts != 1:
            raise ProbeError(f"expected one partition in the reply, got {n_parts}")
        _, error, end, _, n_aborted = r.take(">ihqqi")
        if error:
            raise ProbeError(f"the leader answered error code {error} for {topic}/{partition} at offset {offset}")
        r.raw(16 * max(0, n_aborted))
        (records_size,) = r.take(">i")
        if records_size < struct.calcsize(BATCH_HEADER):
            raise NoBatch(f"no record batch at offset {offset} of {topic}/{partition} (its end: {end})", end)
        header = r.raw(struct.calcsize(BATCH_HEADER))
        base, length, _, magic, _, _, last_delta = struct.unpack(BATCH_HEADER, header)
        if magic != 2:
            raise ProbeError(f"record batch format {magic} at offset {offset} of {topic}/{partition}")
        size = length + LOG_OVERHEAD
        if size > limit:
            return Batch(base, base + last_delta, size, end)
        if records_size < size:
            raise ProbeError(f"the batch at offset {offset} of {topic}/{partition} came cut short")
        return Batch(base, base + last_delta, size, end, header + r.raw(size - len(header)))
