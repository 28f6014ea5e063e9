"""Topics, committed offsets, record limits and the broker's answer, asked with kafka-python's admin client."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from gateway.bus.kafka_python import config
from gateway.bus.kafka_python.errors import mapped
from gateway.core.kafka_settings import KafkaSettings


@contextlib.contextmanager
def _client(settings: KafkaSettings, timeout_s: float) -> Iterator:
    """An admin client of the settings, closed after; the client's errors come out as the bus's."""
    with mapped():
        client = config.admin_client(settings, int(timeout_s * 1000))
        try:
            yield client
        finally:
            client.close()


def ping(settings: KafkaSettings, timeout_s: float) -> None:
    with _client(settings, timeout_s):
        pass


def topics(settings: KafkaSettings, timeout_s: float) -> set[str]:
    with _client(settings, timeout_s) as client:
        return set(client.list_topics())


def create_topics(settings: KafkaSettings, names: list[str], partitions: int, timeout_s: float) -> None:
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    with _client(settings, timeout_s) as client, contextlib.suppress(TopicAlreadyExistsError):
        client.create_topics([NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names])


def committed_offsets(settings: KafkaSettings, group: str, topic: str, timeout_s: float) -> dict[int, int]:
    with _client(settings, timeout_s) as client:
        offsets = client.list_group_offsets(group).get(group, {})
    return {tp.partition: o.offset for tp, o in offsets.items() if tp.topic == topic and o.offset >= 0}


def record_limits(settings: KafkaSettings, topics: list[str], timeout_s: float) -> dict[str, int]:
    """Each topic's ``max.message.bytes``, where it states one."""
    from kafka.admin import ConfigResource, ConfigResourceType

    asked = [ConfigResource(ConfigResourceType.TOPIC, t) for t in topics]
    with _client(settings, timeout_s) as client:
        found = client.describe_configs(asked, config_filter="all").get("topic", {})
    limits = {t: (c.get("max.message.bytes") or {}).get("value") for t, c in found.items()}
    return {t: int(v) for t, v in limits.items() if v is not None}
