"""Temporary: the old Kafka helpers' names, now in :mod:`gateway.bus`, for the modules not yet ported (the stream
service, the command line, some tests). ``producer``, ``consumer``, ``reader`` and ``admin`` still hand out raw
kafka-python clients and ``poll`` a dict keyed by the client's partitions; new code uses ``gateway.bus``'s
wrappers. To be deleted once nothing imports it."""

from __future__ import annotations

from gateway.bus.admin import ensure_topics
from gateway.bus.broker import BrokerError, LocalBroker, start_broker, tansu_binary, which_tansu
from gateway.bus.clients import admin_client as admin
from gateway.bus.clients import consumer_client as consumer
from gateway.bus.clients import producer_client as producer
from gateway.bus.clients import reader_client as reader
from gateway.bus.consumer import client_lag as consumer_lag
from gateway.bus.errors import client_errors
from gateway.bus.fetch import poll_client as poll
from gateway.bus.records import UnreadableRecord as Unreadable

__all__ = [
    "BrokerError",
    "LocalBroker",
    "Unreadable",
    "admin",
    "client_errors",
    "consumer",
    "consumer_lag",
    "ensure_topics",
    "poll",
    "producer",
    "reader",
    "start_broker",
    "tansu_binary",
    "which_tansu",
]
