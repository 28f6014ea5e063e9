"""What every engine's producer does: a send hands back a :class:`Delivery` to wait on; every error, at the send
or at the wait, is a :class:`~gateway.bus.errors.BusError`."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable

from gateway.bus.records import Header


class Delivery(ABC):
    """One record sent, not yet known to be acknowledged."""

    @abstractmethod
    def wait(self, timeout_s: float | None = None) -> int:
        """Block until the broker acknowledged the record (raises if it did not within ``timeout_s``); its offset."""


class Producer(ABC):
    engine: str

    def __init__(self, ack_timeout_s: float) -> None:
        self.ack_timeout_s = ack_timeout_s

    @abstractmethod
    def send(
        self, topic: str, value: bytes | None, key: bytes | None = None, headers: Iterable[Header] = (), partition=None
    ) -> Delivery:
        """Queue one record (on ``partition``: an int, or None for the client's choice)."""

    def send_and_wait(
        self, topic: str, value: bytes | None, key: bytes | None = None, headers: Iterable[Header] = (), partition=None
    ) -> int:
        """Send one record and wait at most ``ack_timeout_s`` for its acknowledgement; its offset."""
        return self.send(topic, value, key, headers, partition).wait(self.ack_timeout_s)

    @abstractmethod
    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every record queued is acknowledged or failed (raises if some are still queued)."""

    @abstractmethod
    def close(self, timeout_s: float | None = None) -> None: ...


def plain_headers(headers: Iterable[Header]) -> list[tuple[str, bytes]] | None:
    """Headers as both engines send them: a null value as an empty one (kafka-python sends only bytes); None for
    none."""
    sent = [(k, b"" if v is None else v) for k, v in headers or ()]
    return sent or None
