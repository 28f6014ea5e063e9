"""Questions about partitions (their first and end offsets, how many a topic has, their leaders), asked on an
admin client's connection of its own.

A fetch reply over the receive limit (an oversize batch) breaks the consumer's connection to that broker, and
every request queued on it, again and again: the fetcher sends its fetch first on every new connection, and the
broker answers in order, so a metadata request behind it failed ("Bad message format") reconnection after
reconnection, for seconds under load, while the stall watch waited for a leader inside the poll loop (past
``max_poll_interval_ms`` once: the member was dropped, its records came back, and the oversize batch with them).
A broker also serves one connection's requests in order, so a request behind a fetch waits out its
``fetch.wait.max.ms``. So the consumer's questions (its lag, the stall watch's ends and leaders, a group's
backlog, a topic's partitions) go on a connection with no fetch on it."""

from __future__ import annotations

from gateway.bus.errors import BusError, NoAnswer
from gateway.bus.librdkafka import config
from gateway.bus.librdkafka.errors import mapped
from gateway.bus.records import Partition
from gateway.core.kafka_settings import KafkaSettings


class OffsetQueries:
    def __init__(self, settings: KafkaSettings) -> None:
        from confluent_kafka.admin import AdminClient

        with mapped():
            self._admin = AdminClient(config.admin(settings))

    def ask(self, parts: list[Partition], first: bool, timeout_s: float) -> dict[Partition, int]:
        """Each partition's first offset (``first``), else its end: the last stable offset (committed records
        only, as the consumers read them)."""
        from confluent_kafka import IsolationLevel, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        spec = OffsetSpec.earliest() if first else OffsetSpec.latest()
        with mapped():
            futures = self._admin.list_offsets(
                {TopicPartition(*p): spec for p in parts},
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=timeout_s,
            )
        out = {}
        for tp, future in futures.items():
            what = f"no offsets of {tp.topic}/{tp.partition} within {timeout_s:.1f} s"
            try:
                with mapped():
                    offset = future.result(timeout=timeout_s + 1).offset
            except TimeoutError:
                raise NoAnswer(f"_TIMED_OUT: {what}") from None
            if offset < 0:  # a request that timed out comes back as an answer: offset -1001, no error
                raise NoAnswer(f"_TIMED_OUT: {what} (the answer held no offset)")
            out[Partition(tp.topic, tp.partition)] = offset
        return out

    def partitions(self, topic: str, timeout_s: float) -> set[int]:
        """The topic's partitions; empty when the broker does not know the topic."""
        with mapped():
            found = self._admin.list_topics(topic, timeout_s).topics.get(topic)
        return set() if found is None or found.error is not None else set(found.partitions)

    def leader(self, p: Partition, timeout_s: float) -> tuple[str, int]:
        """The address of the partition's leader; raises :class:`BusError` if none is known."""
        with mapped():
            meta = self._admin.list_topics(p.topic, timeout_s)
        topic = meta.topics.get(p.topic)
        part = None if topic is None else topic.partitions.get(p.partition)
        broker = None if part is None else meta.brokers.get(part.leader)
        if broker is None:
            raise BusError(f"no known leader for {p.topic}/{p.partition}")
        return broker.host, broker.port
