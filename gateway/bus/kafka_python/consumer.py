"""The consumer on kafka-python, the pure-Python engine (``kafka.client: kafka-python``), through its public API;
:mod:`gateway.bus.kafka_python.fetch` and :mod:`gateway.bus.kafka_python.join` hold the two workarounds that reach
into its private fields. kafka-python's API does not say why a fetch fails (only its log does, which the bus does
not read), so its stalls are named without their cause."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from gateway.bus.consumer import Consumer
from gateway.bus.errors import CorruptBatch
from gateway.bus.kafka_python import config
from gateway.bus.kafka_python.errors import mapped
from gateway.bus.kafka_python.fetch import poll_client
from gateway.bus.rebalance import Hook, Rebalance
from gateway.bus.records import Fetched, Partition
from gateway.core.kafka_settings import KafkaSettings

log = logging.getLogger("lastmile.bus")


class Listener:
    """The hooks in kafka-python's listener shape: it calls these three by name, with its own partition type, on
    its IO thread (where a blocking call such as a commit raises). Without ``on_partitions_lost`` its ``poll``
    raised, ending a gateway that had merely been late. Registered as a virtual subclass of kafka-python's
    ``ConsumerRebalanceListener`` (its ``subscribe`` takes no other), with no kafka type in its bases."""

    def __init__(self, revoked: Hook, assigned: Hook, lost: Hook) -> None:
        self.on_partitions_revoked = lambda tps: revoked(_ours(tps))
        self.on_partitions_assigned = lambda tps: assigned(_ours(tps))
        self.on_partitions_lost = lambda tps: lost(_ours(tps))


class KpConsumer(Consumer):
    engine = "kafka-python"

    def __init__(self, settings: KafkaSettings, group: bool) -> None:
        super().__init__(settings, group)
        with mapped():
            self._client = config.consumer_client(settings, group)
        # for the group's committed offsets (:meth:`group_offsets`), once asked
        self._admin = None
        self._joined = False

    # -- what is read ----------------------------------------------------------------------------------------
    def subscribe(self, topics: list[str], listener: Rebalance | None = None) -> None:
        from kafka import ConsumerRebalanceListener

        hooks = listener or Rebalance()

        # kafka-python revokes before every join, the first too: not joined until assigned
        def joined(hook: Hook, now: bool) -> Hook:
            def call(partitions: list[Partition]) -> None:
                self._joined = now
                hook(partitions)

            return call

        ConsumerRebalanceListener.register(Listener)
        with mapped():
            self._client.subscribe(
                topics,
                listener=Listener(
                    joined(hooks.on_revoked, False), joined(hooks.on_assigned, True), joined(hooks.lost_hook, False)
                ),
            )

    def assign(self, partitions: Iterable[Partition]) -> None:
        with mapped():
            self._client.assign([_theirs(p) for p in partitions])

    def assignment(self) -> set[Partition]:
        with mapped():
            return set(_ours(self._client.assignment()))

    def partitions(self, topic: str, timeout_ms: int | None = None) -> set[int]:
        # from kafka-python's metadata: it asks the broker on its own schedule, without a timeout
        with mapped():
            return set(self._client.partitions_for_topic(topic) or ())

    @property
    def joined(self) -> bool:
        return self._joined

    # -- flow --------------------------------------------------------------------------------------------------
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
            return set(_ours(self._client.paused()))

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

    # -- positions and offsets -----------------------------------------------------------------------------------
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
        """Through an admin client of its own: kafka-python's consumer, asked for them while it joins its group,
        starts the join again, and again."""
        group = self.settings.group_id
        with mapped():
            self._admin = self._admin or config.admin_client(self.settings)
            done = self._admin.list_group_offsets(group).get(group, {})
        return {p: o.offset if (o := done.get(_theirs(p))) is not None and o.offset >= 0 else None for p in partitions}

    def close(self, autocommit: bool = False) -> None:
        """Leave the group; an admin client that fails to close leaves the consumer closed all the same."""
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


def _ours(tps) -> list[Partition]:
    return [Partition(tp.topic, tp.partition) for tp in tps]
