"""Questions about partitions (their first and end offsets, how many a topic has), asked on an admin client's
connection of its own, with no fetch on it: a broker serves one connection's requests in order, so a question
behind a fetch waits out its ``fetch.wait.max.ms``, and a fetch reply over the receive limit breaks the connection
and every question queued on it, reconnection after reconnection (the consumer's lag, the stall watch's ends, a
group's backlog)."""

from __future__ import annotations

from gateway.bus.errors import NoAnswer
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
