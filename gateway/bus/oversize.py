"""The one batch at a partition's position, asked of its leader on a socket of its own: the only Kafka wire code
in the bus, and why it is still needed.

A broker returns the first record batch at a fetch position whole, whatever the fetch size (KIP-74). A batch over
the client's receive limit (librdkafka's ``receive.message.max.bytes``, kafka-python's
``receive_message_max_bytes``) fails the whole connection, again on every retry: every partition fetched from
that broker stops, and no client API says which batch or how big it is. (Tansu also adds the next batch to a
reply whatever its size, so records *before* an oversize batch stop too.) :func:`fetch_batch` asks for the one
batch at a position (Fetch v4, ``max_bytes`` 1) and hangs up after its header when it is over the limit, so no
oversize payload is ever read; within the limit its bytes are returned for kafka-python's record decoder."""

from __future__ import annotations

import socket
import ssl
import struct
from dataclasses import dataclass

from gateway.bus.errors import BusError

BATCH_HEADER = ">qiibIhi"  # base offset, length, leader epoch, magic, crc, attributes, last offset delta
LOG_OVERHEAD = 12  # a batch's base offset and length, not counted in its length
FETCH, FETCH_V4, READ_COMMITTED = 1, 4, 1
MAX_WAIT_MS = 500  # a broker answers as soon as it holds the batch (Tansu answered a wait of 0 with nothing)


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


def _request(topic: str, partition: int, offset: int) -> bytes:
    name, client = topic.encode(), b"lastmile-probe"
    header = struct.pack(">hhih", FETCH, FETCH_V4, 1, len(client)) + client
    body = struct.pack(">iiiibi", -1, MAX_WAIT_MS, 1, 1, READ_COMMITTED, 1) + struct.pack(">h", len(name)) + name
    body += struct.pack(">iiqi", 1, partition, offset, 1)
    return struct.pack(">i", len(header) + len(body)) + header + body


def _exactly(conn: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = conn.recv(min(n - len(data), 1 << 20))
        if not chunk:
            raise ProbeError("the leader closed the connection mid-reply")
        data += chunk
    return bytes(data)


def _take(conn: socket.socket, fmt: str) -> tuple:
    return struct.unpack(fmt, _exactly(conn, struct.calcsize(fmt)))


def fetch_batch(
    address: tuple[str, int],
    topic: str,
    partition: int,
    offset: int,
    limit: int,
    timeout_s: float,
    tls: ssl.SSLContext | None = None,
) -> Batch:
    """The batch at ``offset`` of ``topic``/``partition`` from its leader at ``address`` (over TLS when ``tls`` is
    given): with its bytes when it is at most ``limit`` bytes, else its header alone."""
    host, port = address
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        conn = tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw
        conn.sendall(_request(topic, partition, offset))
        _take(conn, ">iii")  # frame length, correlation id, throttle time
        if _take(conn, ">i")[0] != 1:
            raise ProbeError(f"no record batch at offset {offset} of {topic}/{partition} (an empty reply)")
        _exactly(conn, _take(conn, ">h")[0])  # the topic's name
        if (n_parts := _take(conn, ">i")[0]) != 1:
            raise ProbeError(f"expected one partition in the reply, got {n_parts}")
        _, error, end, _, n_aborted = _take(conn, ">ihqqi")
        if error:
            raise ProbeError(f"the leader answered error code {error} for {topic}/{partition} at offset {offset}")
        _exactly(conn, 16 * max(0, n_aborted))
        (records_size,) = _take(conn, ">i")
        if records_size < struct.calcsize(BATCH_HEADER):
            raise NoBatch(f"no record batch at offset {offset} of {topic}/{partition} (its end: {end})", end)
        header = _exactly(conn, struct.calcsize(BATCH_HEADER))
        base, length, _, magic, _, _, last_delta = struct.unpack(BATCH_HEADER, header)
        if magic != 2:
            raise ProbeError(f"record batch format {magic} at offset {offset} of {topic}/{partition}")
        size = length + LOG_OVERHEAD
        if size > limit:
            return Batch(base, base + last_delta, size, end)
        if records_size < size:
            raise ProbeError(f"the batch at offset {offset} of {topic}/{partition} came cut short")
        return Batch(base, base + last_delta, size, end, header + _exactly(conn, size - len(header)))
