"""The producer behind the project's types: a send hands back a :class:`Delivery` to wait on; every error the
client raises, at the send or at the wait, comes out as a :class:`~gateway.bus.errors.BusError`."""

from __future__ import annotations

from collections.abc import Iterable

from gateway.bus import clients
from gateway.bus.errors import mapped
from gateway.bus.records import Header
from gateway.core.kafka_settings import KafkaSettings


class Delivery:
    """One record sent, not yet known to be acknowledged."""

    def __init__(self, future: object) -> None:
        self._future = future

    def wait(self, timeout_s: float | None = None) -> int:
        """Block until the broker acknowledged the record (raises if it did not within ``timeout_s``); its offset."""
        with mapped():
            return self._future.get(timeout=timeout_s).offset


class Producer:
    def __init__(self, client: object, ack_timeout_s: float) -> None:
        self._client, self.ack_timeout_s = client, ack_timeout_s

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Iterable[Header] = (),
        partition: int | None = None,
    ) -> Delivery:
        """Queue one record. A null header value goes as an empty one (kafka-python sends only bytes values)."""
        sent = [(k, b"" if v is None else v) for k, v in headers or ()]
        with mapped():
            return Delivery(self._client.send(topic, key=key, value=value, headers=sent or None, partition=partition))

    def send_and_wait(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: Iterable[Header] = (),
        partition: int | None = None,
    ) -> int:
        """Send one record and wait at most ``ack_timeout_s`` for its acknowledgement; its offset."""
        return self.send(topic, value, key, headers, partition).wait(self.ack_timeout_s)

    def flush(self, timeout_s: float | None = None) -> None:
        with mapped():
            self._client.flush(timeout=self.ack_timeout_s if timeout_s is None else timeout_s)

    def close(self, timeout_s: float | None = None) -> None:
        with mapped():
            self._client.close(timeout=self.ack_timeout_s if timeout_s is None else timeout_s)


def producer(settings: KafkaSettings) -> Producer:
    """Every send acknowledged by all replicas; a broker that does not answer fails a send within
    ``request_timeout_ms``, and a wait for its acknowledgement within ``ack_timeout_s``."""
    with mapped():
        return Producer(clients.producer_client(settings), settings.ack_timeout_s)
