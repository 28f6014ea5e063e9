"""The Kafka boundary: the only package that imports the Kafka client (import-linter forbids it elsewhere).

It hands out the project's types (:class:`Record`, :class:`Partition`, :class:`Consumer`, :class:`Producer`) and
raises the project's errors (:class:`BusError` and its subclasses), never kafka-python's."""

from gateway.bus.admin import committed_offsets, ensure_topics, ping
from gateway.bus.batch_reader import BatchReader, reader
from gateway.bus.broker import BrokerError, LocalBroker, start_broker, tansu_binary, which_tansu
from gateway.bus.consumer import Consumer, client_reader, consumer
from gateway.bus.errors import (
    BrokerUnavailable,
    BusError,
    CommitFailed,
    CorruptBatch,
    RecordTooLarge,
    UnknownTopic,
)
from gateway.bus.membership import Backlog, IdleWatch, Unassigned
from gateway.bus.producer import Delivery, Producer, producer
from gateway.bus.rebalance import Rebalance
from gateway.bus.records import Header, OversizeRecord, Partition, Record, UnreadableRecord
from gateway.bus.stalls import Stall

__all__ = [
    "Backlog",
    "BatchReader",
    "BrokerError",
    "BrokerUnavailable",
    "BusError",
    "CommitFailed",
    "Consumer",
    "CorruptBatch",
    "Delivery",
    "Header",
    "IdleWatch",
    "LocalBroker",
    "OversizeRecord",
    "Partition",
    "Producer",
    "Rebalance",
    "Record",
    "RecordTooLarge",
    "Stall",
    "Unassigned",
    "UnknownTopic",
    "UnreadableRecord",
    "client_reader",
    "committed_offsets",
    "consumer",
    "ensure_topics",
    "ping",
    "producer",
    "reader",
    "start_broker",
    "tansu_binary",
    "which_tansu",
]
