"""Fetch (v4) on a socket of the bus's own, for :mod:`gateway.bus.batch_reader`: the request for many partitions,
a socket with one fetch in flight whose reply is read as it arrives (never past its bound) and connected without
blocking, and the reply's partitions with their record sets. The reader's links, one per broker: :mod:`links`."""

from __future__ import annotations

import errno
import os
import selectors
import socket
import ssl
import struct
import time

from gateway.bus.records import Partition

FETCH, FETCH_VERSION = 1, 4  # Fetch v4: record batches (magic 2), no flexible fields
FETCH_BYTES = 8 * 1024 * 1024  # one reply's records, over all its partitions (a soft limit, as Kafka's)
PARTITION_FETCH_BYTES = 1024 * 1024  # one partition's share of a reply
MAX_WAIT_MS = 500  # a broker with nothing new answers after this
RECV_BYTES = 1 << 20


class ReplyTooLarge(OSError):
    """A fetch reply over the reader's bound: never read."""


class MalformedReply(OSError):
    """A fetch reply that is not one: another request's correlation id, a length or a field that overruns it, a
    partition named twice.
    Its connection is dropped and its partitions fetched again from where they were (nothing of it is kept)."""


REPLY_HEADER = 12  # a Fetch v4 reply's correlation id, throttle time and topic count
ReplyPartition = tuple[Partition, int, "bytes | None"]  # a partition of a reply: its error code and record set
Addresses = list[tuple]  # socket.getaddrinfo's answer: (family, type, proto, canonname, sockaddr) per address


class Link:
    """One socket to a broker, at most one fetch in flight on it, its reply read as it comes. It connects without
    blocking: :meth:`advance` carries the TCP connect and the TLS handshake on whenever the socket is ready."""

    def __init__(
        self, address: tuple[str, int], tls: ssl.SSLContext | None, timeout_s: float, addresses: Addresses
    ) -> None:
        self.address, self.tls, self.timeout_s = address, tls, timeout_s
        self._addresses = list(addresses)  # looked up already (links.Lookup); each tried in turn, as create_connection
        self.sock: socket.socket = self._connect_next()
        self.dialled_at = time.monotonic()
        self.wants = selectors.EVENT_WRITE  # what the connection waits for next (the connect: writable); 0: ready
        self.size, self.body, self.got = bytearray(4), None, 0  # the reply's length prefix, its body once known
        self.asked: dict[Partition, tuple[int, int]] = {}  # in flight: partition -> (offset, its seek count)
        self.sent_at = 0.0
        self.correlation = -1  # the correlation id of the fetch in flight

    def _connect_next(self) -> socket.socket:
        """A socket connecting (without blocking) to the next address of the broker's name; raises the last
        address's error when none is left."""
        error: OSError = ConnectionError(f"no address for {self.address[0]}")
        while self._addresses:
            family, kind, proto, _, where = self._addresses.pop(0)
            sock = socket.socket(family, kind, proto)
            sock.setblocking(False)
            if (code := sock.connect_ex(where)) in (0, errno.EINPROGRESS):
                return sock
            sock.close()
            error = ConnectionError(code, f"{os.strerror(code)}: {where[0]}")
        raise error

    def advance(self) -> int:
        """Carry the connection on as far as it goes without blocking (the next address where one is refused);
        the selector events it waits for next, 0 once it is ready. Raises ``OSError`` (``ssl.SSLError``
        included) where the connect to every address, or the handshake, failed. ``sock`` may be another socket
        afterwards (the next address, or the TLS socket)."""
        if self.wants and not isinstance(self.sock, ssl.SSLSocket):  # the TCP connect
            if code := self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self.sock.close()
                if not self._addresses:
                    raise ConnectionError(code, os.strerror(code))
                self.sock = self._connect_next()
                return self.wants
            try:
                self.sock.getpeername()  # ENOTCONN while the connect is in progress
            except OSError as exc:
                if exc.errno == errno.ENOTCONN:
                    return self.wants
                raise
            if self.tls is None:
                self.wants = 0
                return 0
            self.sock = self.tls.wrap_socket(self.sock, server_hostname=self.address[0], do_handshake_on_connect=False)
        if self.wants:
            try:
                self.sock.do_handshake()
                self.wants = 0
            except ssl.SSLWantReadError:
                self.wants = selectors.EVENT_READ
            except ssl.SSLWantWriteError:
                self.wants = selectors.EVENT_WRITE
        return self.wants

    def send(self, request: bytes, asked: dict[Partition, tuple[int, int]]) -> None:
        self.sock.settimeout(self.timeout_s)  # a broker that stops reading fails the send, never hangs it
        self.sock.sendall(request)
        self.sock.setblocking(False)
        self.asked, self.sent_at, self.body, self.got = asked, time.monotonic(), None, 0
        self.correlation = int.from_bytes(request[8:12], "big", signed=True)  # after length, api key and version

    def read(self, limit: int) -> bytearray | None:
        """What has arrived; the reply once it is whole. Raises ``OSError`` on a closed or oversize reply.
        The socket writes straight into a buffer of the reply's size: no chunk is copied, nor the whole."""
        while True:
            view = memoryview(self.size if self.body is None else self.body)[self.got :]
            try:
                n = self.sock.recv_into(view, min(len(view), RECV_BYTES))
            except (BlockingIOError, ssl.SSLWantReadError):
                return None
            if not n:
                raise ConnectionError("the broker closed the connection")
            self.got += n
            if self.body is None and self.got == len(self.size):
                want = 4 + int.from_bytes(self.size, "big", signed=True)
                if want < 4 + REPLY_HEADER:
                    raise MalformedReply(f"a fetch reply of {want - 4} bytes")
                if want > limit:
                    raise ReplyTooLarge(f"a fetch reply of {want} bytes (bound {limit})")
                self.body, self.got = bytearray(want - 4), 0
            elif self.body is not None and self.got == len(self.body):
                reply, self.asked, self.body, self.got = self.body, {}, None, 0
                return reply

    def overdue(self, request_timeout_s: float) -> str | None:
        """Why this link is to be dropped now, if it is: not connected in time, or no reply in time."""
        now = time.monotonic()
        if self.wants and now - self.dialled_at > self.timeout_s:
            return f"no connection in {self.timeout_s:g} s"
        if self.asked and now - self.sent_at > request_timeout_s:
            return f"no fetch reply in {request_timeout_s:g} s"
        return None

    def pending(self) -> bool:
        return isinstance(self.sock, ssl.SSLSocket) and self.sock.pending() > 0

    def close(self) -> None:
        self.sock.close()


def fetch_request(
    correlation: int,
    offsets: dict[Partition, int],
    max_bytes: int = FETCH_BYTES,
    partition_bytes: int = PARTITION_FETCH_BYTES,
) -> bytes:
    """Fetch v4 (record batches, read uncommitted) of every partition in ``offsets`` from its offset: at most
    ``max_bytes`` in all and ``partition_bytes`` a partition, but a partition's first batch whole (KIP-74)."""
    topics: dict[str, list[tuple[int, int]]] = {}
    for p, offset in offsets.items():
        topics.setdefault(p.topic, []).append((p.partition, offset))
    body = struct.pack(">hhih", FETCH, FETCH_VERSION, correlation, -1) + struct.pack(
        ">iiiibi", -1, MAX_WAIT_MS, 1, max_bytes, 0, len(topics)
    )
    for topic, parts in topics.items():
        name = topic.encode()
        body += struct.pack(">h", len(name)) + name + struct.pack(">i", len(parts))
        body += b"".join(struct.pack(">iqi", p, o, partition_bytes) for p, o in parts)
    return struct.pack(">i", len(body)) + body


def reply_partitions(reply: bytes | bytearray, correlation: int) -> list[ReplyPartition]:
    """A Fetch v4 reply's partitions: each with its error code and its record set. Raises
    :class:`MalformedReply` for a reply to another request or one whose fields overrun it."""
    (got,) = struct.unpack_from(">i", reply, 0) if len(reply) >= 4 else (None,)
    if got != correlation:
        raise MalformedReply(f"a fetch reply for correlation id {got}, expected {correlation}")
    try:
        return _partitions(reply)
    except (struct.error, UnicodeDecodeError) as exc:
        raise MalformedReply(f"a fetch reply that does not parse: {exc}") from None


def _partitions(reply: bytes | bytearray) -> list[ReplyPartition]:
    out, pos, seen, view = [], 8, set(), memoryview(reply)  # after the correlation id and the throttle time
    (n_topics,) = struct.unpack_from(">i", reply, pos)
    pos += 4
    for _ in range(n_topics):
        (name_len,) = struct.unpack_from(">h", reply, pos)
        if name_len < 0:
            raise MalformedReply(f"a topic name of {name_len} bytes")
        topic = reply[pos + 2 : pos + 2 + name_len].decode()
        (n_parts,) = struct.unpack_from(">i", reply, pos + 2 + name_len)
        pos += 6 + name_len
        for _ in range(n_parts):
            partition, error, _, _, n_aborted = struct.unpack_from(">ihqqi", reply, pos)
            pos += 26 + 16 * max(n_aborted, 0)
            (size,) = struct.unpack_from(">i", reply, pos)
            pos += 4
            if pos + max(size, 0) > len(reply):
                raise MalformedReply(f"a record set of {size} bytes at {pos} overruns a reply of {len(reply)}")
            if (p := Partition(topic, partition)) in seen:  # its records would be handed out twice
                raise MalformedReply(f"a fetch reply naming {topic}/{partition} twice")
            seen.add(p)
            out.append((p, error, bytes(view[pos : pos + size]) if size > 0 else None))  # its one copy
            pos += max(size, 0)
    return out
