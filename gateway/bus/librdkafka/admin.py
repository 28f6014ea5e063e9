"""Topics, committed offsets and the broker's answer, asked with librdkafka's ``AdminClient``."""

from __future__ import annotations

import time

from gateway.bus.errors import AccessDenied, BrokerUnavailable, BusError, NoAnswer, UnknownTopic
from gateway.bus.librdkafka import config
from gateway.bus.librdkafka.errors import from_error, kind_of, mapped
from gateway.core.kafka_settings import KafkaSettings

# a ping asks this long at a time, so that a refusal is said at once, not at the ping's end
ATTEMPT_S = 0.5


def admin_client(settings: KafkaSettings, **properties: object):
    """An admin client of the settings, with ``properties`` (librdkafka's) beside them."""
    from confluent_kafka.admin import AdminClient

    with mapped():
        return AdminClient({**config.admin(settings), **properties})


def ping(settings: KafkaSettings, timeout_s: float) -> None:
    """Return once a broker answers a metadata request; raises :class:`NoAnswer` if none does in time, or
    :class:`~gateway.bus.AccessDenied` where a broker answered but refused this client's authentication (the
    metadata request then fails as a transport failure; librdkafka's error callback says why). Its connection
    failures are the ping's answer, said once by the caller: not logged too. Anything else (a property librdkafka
    refuses) is said at once."""
    refused: list = []
    deny = lambda error: refused.append(error) if kind_of(error) is AccessDenied else None  # noqa: E731
    client = admin_client(settings, error_cb=deny, log_level=0)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with mapped():
                meta = client.list_topics(timeout=min(ATTEMPT_S, max(deadline - time.monotonic(), 0.01)))
            break
        except BrokerUnavailable:
            # serves the error callbacks queued meanwhile
            client.poll(0)
            if refused:
                raise from_error(refused[0]) from None
            if time.monotonic() >= deadline:
                raise
    if not meta.brokers:
        raise NoAnswer("no broker in the cluster's metadata")


def topics(settings: KafkaSettings, timeout_s: float) -> set[str]:
    client = admin_client(settings)
    with mapped():
        return set(client.list_topics(timeout=timeout_s).topics)


def create_topics(settings: KafkaSettings, names: list[str], partitions: int, timeout_s: float) -> None:
    """Create each of ``names`` that does not exist yet (one that another client made meanwhile is no error)."""
    from confluent_kafka.admin import NewTopic

    client = admin_client(settings)
    with mapped():
        futures = client.create_topics(
            [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names], request_timeout=timeout_s
        )
    for name, future in futures.items():
        try:
            with mapped():
                future.result(timeout=timeout_s)
        except BusError as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise type(exc)(f"creating topic {name}: {exc}") from exc
        except TimeoutError:
            raise NoAnswer(f"creating topic {name}: no answer within {timeout_s:.0f} s") from None


def committed_offsets(settings: KafkaSettings, group: str, topic: str, timeout_s: float) -> dict[int, int]:
    """Per partition of ``topic``, the offset ``group`` committed (partitions it never committed are absent)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    client = admin_client(settings)
    with mapped():
        meta = client.list_topics(topic, timeout=timeout_s).topics.get(topic)
    parts = [] if meta is None or meta.error is not None else sorted(meta.partitions)
    if not parts:
        return {}
    asked = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in parts])
    with mapped():
        (future,) = client.list_consumer_group_offsets([asked], request_timeout=timeout_s).values()
        answer = future.result(timeout=timeout_s)
    out = {}
    for tp in answer.topic_partitions:
        if tp.error is not None:
            raise from_error(tp.error)
        if tp.offset >= 0:
            out[tp.partition] = tp.offset
    return out


def record_limits(settings: KafkaSettings, topics: list[str], timeout_s: float) -> dict[str, int]:
    """Each topic's ``max.message.bytes``, where it states one."""
    from confluent_kafka.admin import ConfigResource

    client = admin_client(settings)
    with mapped():
        futures = client.describe_configs([ConfigResource("topic", t) for t in topics], request_timeout=timeout_s)
    out = {}
    for resource, future in futures.items():
        try:
            with mapped():
                found = future.result(timeout=timeout_s).get("max.message.bytes")
        except UnknownTopic:
            continue
        if found is not None and found.value is not None:
            out[resource.name] = int(found.value)
    return out
