"""The reader's links (:mod:`gateway.bus.batch_reader`), one :class:`~gateway.bus.fetch_link.Link` per broker
under one selector: a broker's name looked up on a thread of its own (:class:`Lookup`), its connection made
without blocking, a broker whose link failed dialled again after a while."""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import threading
import time

from gateway.bus.fetch_link import Addresses, Link
from gateway.bus.records import Partition


class Lookup:
    """A broker name's addresses. A numeric address is read at once; a name is looked up on a thread of its own
    (``getaddrinfo`` blocks for as long as the resolver's timeouts, which a poll must not), and ``woken`` is called
    when its answer is in."""

    def __init__(self, address: tuple[str, int], woken: object = None) -> None:
        self.address, self.started, self.answered_at = address, time.monotonic(), 0.0
        self.addresses: Addresses | None = None
        self.error: OSError | None = None
        self._done = threading.Event()
        try:
            self.addresses = socket.getaddrinfo(*address, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
            self.answered_at = self.started
            self._done.set()
        except socket.gaierror:  # a name, not a numeric address
            self._woken = woken
            threading.Thread(target=self._look_up, name=f"lookup {address[0]}", daemon=True).start()

    def _look_up(self) -> None:
        try:
            self.addresses = socket.getaddrinfo(*self.address, type=socket.SOCK_STREAM)
        except OSError as exc:
            self.error = OSError(f"no address for {self.address[0]}: {exc}")
        self.answered_at = time.monotonic()
        self._done.set()
        if callable(self._woken):
            self._woken()

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def stale(self, max_age_s: float) -> bool:
        """Answered more than ``max_age_s`` ago (a hung lookup that answered long after it was given up on)."""
        return self.done and time.monotonic() - self.answered_at > max_age_s

    def answer(self, timeout_s: float) -> Addresses | None:
        """The addresses once looked up, None while the lookup runs. Raises ``OSError`` where the name has no
        address, or its lookup has run past ``timeout_s``."""
        if not self.done:
            if time.monotonic() - self.started > timeout_s:
                raise OSError(f"no address for {self.address[0]} in {timeout_s:g} s (its name lookup is not answered)")
            return None
        if self.error is not None:
            raise self.error
        return self.addresses


class Links:
    """A reader's links, one per broker, watched by one selector. A broker's name is looked up on a thread
    (:class:`Lookup`) whose answer wakes the selector; a broker whose link failed is not dialled again before
    ``redial_s``."""

    def __init__(self, tls: ssl.SSLContext | None, connect_timeout_s: float, redial_s: float) -> None:
        self.tls, self.connect_timeout_s, self.redial_s = tls, connect_timeout_s, redial_s
        self.by_address: dict[tuple[str, int], Link] = {}
        self._lookups: dict[tuple[str, int], Lookup] = {}  # brokers whose name is being looked up
        self._redial_at: dict[tuple[str, int], float] = {}
        self._selector = selectors.DefaultSelector()
        self._wake_in, self._wake_out = socket.socketpair()  # a lookup's answer ends a select waiting for it
        for end in (self._wake_in, self._wake_out):
            end.setblocking(False)
        self._selector.register(self._wake_in, selectors.EVENT_READ, None)
        self._wake_lock = threading.Lock()  # a lookup thread's wake against close()

    def asked(self) -> set[Partition]:
        """The partitions with a fetch in flight."""
        return {p for link in self.by_address.values() for p in link.asked}

    def idle(self, address: tuple[str, int]) -> Link | None:
        """The link to ``address`` if it can take a fetch now, dialled if there is none (unless its broker waits to
        be dialled again); None while its name is looked up, it connects or it has a fetch in flight. Raises
        ``OSError`` where the name has no address (or no answer within the connect timeout) or dialling failed."""
        link = self.by_address.get(address)
        if link is None:
            if time.monotonic() < self._redial_at.get(address, 0.0):
                return None
            if (addresses := self._addresses(address)) is None:
                return None
            link = self.by_address[address] = Link(address, self.tls, self.connect_timeout_s, addresses)
            self._selector.register(link.sock, link.wants, address)
            self.advance(address)
        return None if link.asked or link.wants else link

    def _addresses(self, address: tuple[str, int]) -> Addresses | None:
        """The broker's addresses, None while its name is looked up. A lookup that has not answered in time is
        kept (no second thread for one name) and fails again at the next dial."""
        lookup = self._lookups.get(address)
        if lookup is None or lookup.stale(self.connect_timeout_s):
            lookup = self._lookups[address] = Lookup(address, self._wake)
        done = lookup.done  # read first: a lookup that answers while answer() times out is kept, for the next dial
        try:
            addresses = lookup.answer(self.connect_timeout_s)
        except OSError:
            if done:
                del self._lookups[address]
            raise
        if addresses is not None:
            del self._lookups[address]
        return addresses

    def _wake(self) -> None:
        with self._wake_lock, contextlib.suppress(OSError):  # (a full pair: a wake already waits)
            if self._wake_out.fileno() >= 0:  # -1 once the links are closed (its number may be another's by then)
                self._wake_out.send(b"\0")

    def advance(self, address: tuple[str, int]) -> None:
        """Carry a connecting link on (:meth:`Link.advance`); raises ``OSError`` where it failed. A link whose
        socket changed (the next address, the TLS wrap) is registered anew under its new socket."""
        link = self.by_address[address]
        key = self._selector.get_map()[link.sock.fileno()]  # registered before the link moved on
        try:
            events = link.advance() or selectors.EVENT_READ
        finally:
            if key.fileobj is not link.sock:  # (a wrapped socket's raw one no longer has a file descriptor)
                self._selector.unregister(key.fileobj)
                self._selector.register(link.sock, selectors.EVENT_WRITE, address)
        self._selector.modify(link.sock, events, address)

    def busy(self) -> list[tuple[str, int]]:
        """The brokers whose name is being looked up, or whose link connects or has a fetch in flight."""
        looking = [a for a, lookup in self._lookups.items() if not lookup.done]
        return [*looking, *(a for a, link in self.by_address.items() if link.asked or link.wants)]

    def ready(self, busy: list[tuple[str, int]], timeout_s: float) -> list[tuple[str, int]]:
        """Of ``busy``, those whose socket can go on (TLS data already decrypted first), waiting up to ``timeout_s``
        (a lookup's answer ends the wait, and its broker is dialled at the next :meth:`idle`)."""
        pending = [a for a in busy if (link := self.by_address.get(a)) is not None and link.asked and link.pending()]
        if pending:
            return pending
        ready = [key.data for key, _ in self._selector.select(max(timeout_s, 0.0))]
        if None in ready:
            with contextlib.suppress(BlockingIOError):
                self._wake_in.recv(4096)
        return [a for a in ready if a is not None]

    def hang_up(self, address: tuple[str, int]) -> None:
        """Close the link to ``address`` (if any); its broker is dialled again after ``redial_s``."""
        self._redial_at[address] = time.monotonic() + self.redial_s
        if (link := self.by_address.pop(address, None)) is not None:
            self._selector.unregister(link.sock)
            link.close()

    def close(self) -> None:
        for address in list(self.by_address):
            self.hang_up(address)
        self._lookups.clear()  # (their threads end with their lookups)
        self._selector.close()
        with self._wake_lock:
            self._wake_in.close()
            self._wake_out.close()
