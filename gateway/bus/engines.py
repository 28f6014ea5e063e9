"""The one place that picks a client (``kafka.client``): librdkafka (confluent-kafka), the default, or
kafka-python."""

from __future__ import annotations

from gateway.bus.consumer import Consumer
from gateway.bus.producer import Producer
from gateway.core.kafka_settings import KafkaSettings


def consumer(settings: KafkaSettings, group: bool = True) -> Consumer:
    """A member of ``settings.group_id``, from the earliest offset of a new group, committed records only."""
    if settings.client == "kafka-python":
        from gateway.bus.kafka_python.consumer import KpConsumer as Engine
    else:
        from gateway.bus.librdkafka.consumer import RdConsumer as Engine
    return Engine(settings, group=group)


def reader(settings: KafkaSettings) -> Consumer:
    """No group and no commits: it assigns partitions and seeks (the monitor, ``lastmile scores``)."""
    return consumer(settings, group=False)


def producer(settings: KafkaSettings) -> Producer:
    """Every send acknowledged by all in-sync replicas (a wait fails after ``ack_timeout_s``)."""
    if settings.client == "kafka-python":
        from gateway.bus.kafka_python.producer import KpProducer as Engine
    else:
        from gateway.bus.librdkafka.producer import RdProducer as Engine
    return Engine(settings)
