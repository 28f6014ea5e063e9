"""librdkafka's exceptions as the project's: :func:`mapped` around every call into confluent-kafka."""

from __future__ import annotations

from contextlib import AbstractContextManager

from gateway.bus.errors import BrokerUnavailable, BusError, named, translating
from gateway.bus.librdkafka.codes import kind_of


def from_error(error: object) -> BusError:
    """The project's error for a ``confluent_kafka.KafkaError``."""
    return named(kind_of(error.name(), error.retriable()), error.name(), error.str())


def to_bus_error(exc: BaseException) -> BusError | None:
    """The project's error for what confluent-kafka raised (``KafkaException``, or ``BufferError`` for a full
    producer queue), or None for what is not the client's."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return from_error(exc.args[0])
    if isinstance(exc, KafkaException):
        return BusError(f"KafkaException: {exc}")
    if isinstance(exc, BufferError):
        return BrokerUnavailable(f"the producer's queue is full: {exc}")
    return None


def mapped() -> AbstractContextManager[None]:
    """Run a call into confluent-kafka; its exceptions come out as :class:`BusError` subclasses."""
    return translating(to_bus_error)
