"""The producer on kafka-python. A send or wait that fails other than by a slow broker or a record too large marks
the client broken (its producer state can fail for good), and the next send starts a new one."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from gateway.bus.errors import BrokerUnavailable, BusError, RecordTooLarge
from gateway.bus.kafka_python import config
from gateway.bus.kafka_python.errors import mapped
from gateway.bus.producer import Delivery, Producer, plain_headers
from gateway.bus.records import Header
from gateway.core.kafka_settings import KafkaSettings

log = logging.getLogger("lastmile.bus")
# failures that leave the client as it was
EXPECTED = (BrokerUnavailable, RecordTooLarge)


class KpDelivery(Delivery):
    def __init__(self, future: object, producer: KpProducer) -> None:
        self._future, self._producer = future, producer

    def wait(self, timeout_s: float | None = None) -> int:
        try:
            with mapped():
                return self._future.get(timeout=timeout_s).offset
        except BusError as exc:
            self._producer.failed(exc)
            raise


class KpProducer(Producer):
    engine = "kafka-python"

    def __init__(self, settings: KafkaSettings) -> None:
        super().__init__(settings.ack_timeout_s)
        self._settings, self._broken = settings, None
        with mapped():
            self._client = config.producer_client(settings)

    def failed(self, exc: BusError) -> None:
        if not isinstance(exc, EXPECTED):
            self._broken = str(exc)

    def send(self, topic, value, key=None, headers: Iterable[Header] = (), partition=None) -> KpDelivery:
        if self._broken is not None:
            log.warning("the producer's client failed (%s): starting a new one", self._broken)
            self._broken = None
            with mapped():
                self._client.close(timeout=0)
                self._client = config.producer_client(self._settings)
        try:
            with mapped():
                sent = plain_headers(headers)
                future = self._client.send(topic, key=key, value=value, headers=sent, partition=partition)
        except BusError as exc:
            self.failed(exc)
            raise
        return KpDelivery(future, self)

    def flush(self, timeout_s: float | None = None) -> None:
        with mapped():
            self._client.flush(timeout=self.ack_timeout_s if timeout_s is None else timeout_s)

    def close(self, timeout_s: float | None = None) -> None:
        with mapped():
            self._client.close(timeout=self.ack_timeout_s if timeout_s is None else timeout_s)
