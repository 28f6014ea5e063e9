"""The producer on librdkafka (confluent-kafka); :meth:`RdDelivery.wait` serves the client's poll until its
delivery report has come. A client whose producer id is lost for good (:data:`ID_LOST`, a fatal error) is replaced
at the next send; what it had not delivered failed, so its callers send it again."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

from gateway.bus.errors import BusError, NoAnswer
from gateway.bus.librdkafka import config
from gateway.bus.librdkafka.errors import from_error, mapped
from gateway.bus.librdkafka.health import ClientHealth
from gateway.bus.producer import Delivery, Producer, plain_headers
from gateway.bus.records import Header
from gateway.core.kafka_settings import KafkaSettings

log = logging.getLogger("lastmile.bus")
# a full queue: serve delivery reports this long, then try the send again
QUEUE_WAIT_S = 0.05
# errors that leave the client's producer id unusable (a broker restarted without its log, or that fenced it)
LOST = "PRODUCER_FENCED INVALID_PRODUCER_EPOCH UNKNOWN_PRODUCER_ID INVALID_PRODUCER_ID_MAPPING _FATAL _FENCED"
ID_LOST = frozenset([*LOST.split(), "OUT_OF_ORDER_SEQUENCE_NUMBER"])


class RdDelivery(Delivery):
    __slots__ = ("_client", "_health", "error", "offset")

    def __init__(self, client: object, health: ClientHealth) -> None:
        self._client, self._health, self.offset, self.error = client, health, None, None

    def __call__(self, error: object, message: object) -> None:
        """librdkafka's delivery report; a lost producer id makes the next send start a new client."""
        if error is not None:
            self.error = from_error(error)
            if (error.fatal() or error.name() in ID_LOST) and self._health.fatal is None:
                self._health.fatal = str(self.error)
        else:
            self.offset = message.offset()

    def wait(self, timeout_s: float | None = None) -> int:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self.offset is None and self.error is None:
            left = 1.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise NoAnswer(f"_MSG_TIMED_OUT: no acknowledgement within {timeout_s:.1f} s")
            with mapped():
                self._client.poll(min(left, 1.0))
        if self.error is not None:
            raise self.error
        return self.offset


class RdProducer(Producer):
    engine = "librdkafka"

    def __init__(self, settings: KafkaSettings) -> None:
        from confluent_kafka import Producer as Client

        super().__init__(settings.ack_timeout_s)
        self._conf = config.producer(settings)
        self._block_s = settings.max_block_ms / 1000
        self._new_client = Client
        self._start()

    def _start(self) -> None:
        self.health = ClientHealth()
        with mapped():
            self._c = self._new_client({**self._conf, "error_cb": self.health.on_error})

    def _recover(self) -> None:
        fatal = self.health.fatal
        if fatal is None:
            return
        log.warning("the producer's client failed for good (%s): starting a new one", fatal)
        # what the old one still held fails now, so its waits end at once
        self._c.purge()
        self._c.poll(0)
        self._start()

    def send(self, topic, value, key=None, headers: Iterable[Header] = (), partition=None) -> RdDelivery:
        self._recover()
        deadline, recovered = time.monotonic() + self._block_s, False
        while True:
            delivery = RdDelivery(self._c, self.health)
            args = {"value": value, "key": key, "headers": plain_headers(headers), "on_delivery": delivery}
            if partition is not None:
                args["partition"] = partition
            try:
                with mapped():
                    self._c.produce(topic, **args)
                return delivery
            except BusError as exc:
                # the client failed for good: a new one, once
                if "_FATAL" in str(exc) and not recovered:
                    self.health.fatal, recovered = self.health.fatal or str(exc), True
                    self._recover()
                    continue
                # a slow or absent broker: wait for room, at most max_block_ms
                if "queue is full" not in str(exc) or time.monotonic() > deadline:
                    raise
                self._c.poll(QUEUE_WAIT_S)

    def flush(self, timeout_s: float | None = None) -> None:
        timeout = self.ack_timeout_s if timeout_s is None else timeout_s
        with mapped():
            left = self._c.flush(timeout)
        if left:
            raise NoAnswer(f"_MSG_TIMED_OUT: {left} records not acknowledged within {timeout:.1f} s")

    def close(self, timeout_s: float | None = None) -> None:
        """Wait for what is queued (at most the timeout); what is left is dropped with the client."""
        with mapped():
            self._c.flush(self.ack_timeout_s if timeout_s is None else timeout_s)
