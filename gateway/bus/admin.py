"""Topics and committed offsets, asked of the broker's admin API."""

from __future__ import annotations

import contextlib

from gateway.bus.clients import admin_client
from gateway.bus.errors import mapped
from gateway.core.kafka_settings import KafkaSettings


def ping(settings: KafkaSettings) -> None:
    """Return once a broker of ``settings.bootstrap`` answers; raises :class:`BrokerUnavailable` if none does."""
    with mapped():
        admin_client(settings).close()


def ensure_topics(settings: KafkaSettings, partitions: int = 4, extra: tuple[str, ...] = ()) -> list[str]:
    """Create the input, output and DLQ topics (and ``extra``, e.g. the labels topic) if missing; their names."""
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    names = [settings.input_topic, settings.output_topic, settings.dlq, *extra]
    with mapped():
        client = admin_client(settings)
        try:
            existing = set(client.list_topics())
            new = [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names if n not in existing]
            if new:
                with contextlib.suppress(TopicAlreadyExistsError):
                    client.create_topics(new)
        finally:
            client.close()
    return names


def committed_offsets(settings: KafkaSettings, group: str, topic: str) -> dict[int, int]:
    """Per partition of ``topic``, the offset ``group`` committed (partitions it never committed are absent)."""
    with mapped():
        client = admin_client(settings)
        try:
            offsets = client.list_group_offsets(group).get(group, {})
        finally:
            client.close()
    return {tp.partition: o.offset for tp, o in offsets.items() if tp.topic == topic}
