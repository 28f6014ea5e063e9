"""The consumer on kafka-python (``kafka.client: kafka-python``), through its public API but for the two
workarounds in :mod:`~gateway.bus.kafka_python.fetch` and :mod:`~gateway.bus.kafka_python.join`. Its API does not
say why a fetch fails, so its stalls are named without their cause."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from gateway.bus.consumer import Consumer, Hook, Rebalance
from gateway.bus.errors import CorruptBatch
from gateway.bus.kafka_python import config
from gateway.bus.kafka_python.errors import mapped
from gateway.bus.kafka_python.fetch import poll_client
from gateway.bus.records import Fetched, Partition, partitions_of
from gateway.core.kafka_settings import KafkaSettings

log = logging.getLogger("lastmile.bus")


class Listener:
    """The hooks in kafka-python's listener shape, with its partition type; registered as a virtual subclass of its
    ``ConsumerRebalanceListener`` (its ``subscribe`` takes no other), so that this module imports no kafka type.
    ``joined`` hears whether the member is in a generation: kafka-python revokes before every join, the first too."""

    def __init__(self, hooks: Rebalance, joined: Callable[[bool], None]) -> None:
        def heard(hook: Hook, now: bool) -> Callable:
            return lambda tps: (joined(now), hook(partitions_of(tps)))

        self.on_partitions_revoked = heard(hooks.on_revoked, False)
        self.on_partitions_assigned = heard(hooks.on_assigned, True)
        self.on_partitions_lost = heard(hooks.lost_hook, False)


class KpConsumer(Consumer):
    engine = "kafka-python"

    def __init__(self, settings: KafkaSettings, group: bool) -> None:
        super().__init__(settings, group)
        with mapped():
            self._client = config.consumer_client(settings, group)
        self._admin = None
        self._joined = False

    def subscribe(self, topics: list[str], listener: Rebalance | None = None) -> None:
        from kafka import ConsumerRebalanceListener

        ConsumerRebalanceListener.register(Listener)
        joined = lambda now: setattr(self, "_joined", now)  # noqa: E731
        with mapped():
            self._client.subscribe(topics, listener=Listener(listener or Rebalance(), joined))

    def assign(self, partitions: Iterable[Partition]) -> None:
        with mapped():
            self._client.assign([_theirs(p) for p in partitions])

    def assignment(self) -> set[Partition]:
        with mapped():
            return set(partitions_of(self._client.assignment()))

    def partitions(self, topic: str, timeout_ms: int | None = None) -> set[int]:
        # from kafka-python's metadata: it asks the broker on its own schedule, without a timeout
        with mapped():
            return set(self._client.partitions_for_topic(topic) or ())

    @property
    def joined(self) -> bool:
        return self._joined

    def _fetch(self, timeout_ms: int, max_records: int) -> list[Fetched]:
        try:
            got = poll_client(self._client, timeout_ms, max_records)
        except CorruptBatch as exc:
            # no position moves: the partition stalls there, and readiness says so
            log.warning("%s", exc)
            return []
        return [r for records in got.values() for r in records]

    def paused(self) -> set[Partition]:
        with mapped():
            return set(partitions_of(self._client.paused()))

    def pause(self, *partitions: Partition) -> None:
        with mapped():
            self._client.pause(*map(_theirs, partitions))

    def resume(self, *partitions: Partition) -> None:
        with mapped():
            self._client.resume(*map(_theirs, partitions))

    def stall_cause(self, since: float) -> str:
        return (
            "kafka-python does not say why (a batch over kafka.max_message_bytes is one cause; client: librdkafka "
            "names it)"
        )

    def position(self, partition: Partition) -> int:
        with mapped():
            return self._client.position(_theirs(partition), timeout_ms=self.settings.probe_timeout_ms)

    def seek(self, partition: Partition, offset: int) -> None:
        with mapped():
            self._client.seek(_theirs(partition), offset)

    def seek_to_beginning(self, *partitions: Partition) -> None:
        with mapped():
            self._client.seek_to_beginning(*map(_theirs, partitions))

    def commit(self, offsets: Mapping[Partition, int]) -> None:
        from kafka.structs import OffsetAndMetadata

        held = self.assignment()
        mine = {_theirs(p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items() if p in held}
        if mine:
            with mapped():
                self._client.commit(mine)

    def watermarks(self, partitions: Iterable[Partition], timeout_ms: int | None = None) -> dict[Partition, tuple]:
        tps = [_theirs(p) for p in partitions]
        with mapped():
            ends = self._client.end_offsets(tps, timeout_ms=timeout_ms)
            firsts = self._client.beginning_offsets(tps, timeout_ms=timeout_ms)
        return {Partition(tp.topic, tp.partition): (firsts[tp], ends[tp]) for tp in tps}

    def offsets_for_times(self, times_ms: Mapping[Partition, int]) -> dict[Partition, int | None]:
        with mapped():
            found = self._client.offsets_for_times({_theirs(p): t for p, t in times_ms.items()})
        return {Partition(tp.topic, tp.partition): None if hit is None else hit.offset for tp, hit in found.items()}

    def group_offsets(self, partitions: list[Partition], timeout_ms: int | None = None) -> dict[Partition, int | None]:
        """Through an admin client: kafka-python's consumer, asked while it joins its group, starts the join again."""
        group = self.settings.group_id
        with mapped():
            self._admin = self._admin or config.admin_client(self.settings)
            done = self._admin.list_group_offsets(group).get(group, {})
        return {p: o.offset if (o := done.get(_theirs(p))) is not None and o.offset >= 0 else None for p in partitions}

    def close(self, autocommit: bool = False) -> None:
        """Leave the group (the consumer closed even where its admin client fails to close)."""
        self._joined = False
        with mapped():
            try:
                self._client.close(autocommit=autocommit)
            finally:
                if self._admin is not None:
                    self._admin.close()


def _theirs(partition: Partition):
    """kafka-python's ``TopicPartition`` for one of ours (its methods check the type)."""
    from kafka import TopicPartition

    return TopicPartition(partition.topic, partition.partition)
