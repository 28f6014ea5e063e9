"""Replies read off a socket of the bus's own (Kafka's wire protocol, for the requests kafka-python cannot make)."""

from __future__ import annotations

import socket
import struct

from gateway.bus.errors import BusError

RECV_BYTES = 1 << 20  # read at most this much per recv


class WireReader:
    """Reads exact byte counts and big-endian fields; a peer that hangs up mid-reply raises ``error``."""

    def __init__(self, conn: socket.socket, error: type[BusError], peer: str) -> None:
        self.conn, self.error, self.peer = conn, error, peer

    def raw(self, n: int) -> bytes:
        """The next ``n`` bytes, read exactly."""
        data = bytearray()
        while len(data) < n:
            chunk = self.conn.recv(min(n - len(data), RECV_BYTES))
            if not chunk:
                raise self.error(f"the {self.peer} closed the connection mid-reply")
            data += chunk
        return bytes(data)

    def take(self, fmt: str) -> tuple:
        """The next fields of ``fmt`` (big-endian struct format)."""
        return struct.unpack(fmt, self.raw(struct.calcsize(fmt)))

    def reply(self) -> bytes:
        """One size-prefixed reply, whole."""
        (size,) = self.take(">i")
        return self.raw(size)
