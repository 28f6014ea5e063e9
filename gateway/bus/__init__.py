"""The Kafka boundary: the only package that imports a Kafka client (import-linter forbids it elsewhere). It hands
out the project's types and raises the project's errors (:class:`BusError`), never a client's, on librdkafka by
default or kafka-python when ``kafka.client`` says so (:mod:`gateway.bus.engines`)."""

from gateway.bus.admin import check_record_limits, ensure_topics, ping
from gateway.bus.consumer import Consumer, Rebalance
from gateway.bus.engines import consumer, producer, reader
from gateway.bus.errors import (
    AccessDenied,
    BrokerUnavailable,
    BusError,
    ClientConfigError,
    CommitFailed,
    CorruptBatch,
    NoAnswer,
    RecordTooLarge,
    UnknownTopic,
)
from gateway.bus.producer import Delivery, Producer
from gateway.bus.records import (
    MessageView,
    Partition,
    Polled,
    Record,
    RecordView,
    UnreadableRecord,
    timestamp_ms,
)

__all__ = [
    "AccessDenied",
    "BrokerUnavailable",
    "BusError",
    "ClientConfigError",
    "CommitFailed",
    "Consumer",
    "CorruptBatch",
    "Delivery",
    "MessageView",
    "NoAnswer",
    "Partition",
    "Polled",
    "Producer",
    "Rebalance",
    "Record",
    "RecordTooLarge",
    "RecordView",
    "UnknownTopic",
    "UnreadableRecord",
    "check_record_limits",
    "consumer",
    "ensure_topics",
    "ping",
    "producer",
    "reader",
    "timestamp_ms",
]
