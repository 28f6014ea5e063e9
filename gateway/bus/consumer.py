"""The consumer behind the project's types: records, partitions and offsets in, :class:`BusError` out.

:func:`consumer` is a member of the settings' group (manual commits, from the earliest offset of a new group);
:func:`client_reader` has no group and no commits (it assigns partitions and seeks itself); the readers the
services use fetch on their own sockets (:mod:`gateway.bus.batch_reader`). Every method maps the
client's exceptions (:mod:`gateway.bus.errors`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from gateway.bus import clients
from gateway.bus.direct import Fetched
from gateway.bus.errors import CorruptBatch, mapped
from gateway.bus.fetch import poll_client
from gateway.bus.membership import Backlog
from gateway.bus.rebalance import Rebalance, observed
from gateway.bus.records import Partition
from gateway.bus.stalls import Stall, Watch
from gateway.core.kafka_settings import KafkaSettings

log = logging.getLogger("lastmile.bus")


class Consumer:
    def __init__(self, client: object, watch: Watch | None = None, settings: KafkaSettings | None = None) -> None:
        self._client, self._watch, self._settings = client, watch, settings
        self._admin = None  # for the group's committed offsets (:meth:`backlog`), once asked
        self._next: dict[Partition, int] = {}  # per partition, the offset after the last record handed out
        self.joined = False  # subscribed, and in a generation of its group: False while it joins

    # -- what is read ----------------------------------------------------------------------------------------
    def subscribe(self, topics: list[str], listener: Rebalance | None = None) -> None:
        def joined(now: bool) -> None:
            self.joined = now

        with mapped():
            self._client.subscribe(topics, listener=observed(listener or Rebalance(), joined))

    def assign(self, partitions: Iterable[Partition]) -> None:
        with mapped():
            self._client.assign([clients.to_client(p) for p in partitions])

    def assignment(self) -> set[Partition]:
        with mapped():
            return {Partition(tp.topic, tp.partition) for tp in self._client.assignment()}

    def partitions(self, topic: str) -> set[int]:
        """The topic's partitions; empty when the broker does not know the topic (yet)."""
        with mapped():
            return set(self._client.partitions_for_topic(topic) or ())

    # -- flow --------------------------------------------------------------------------------------------------
    def poll(self, timeout_ms: int, max_records: int | None = None) -> list[Fetched]:
        """The next records (at most ``max_records``), in offset order per partition; a record the client cannot
        decode comes as an :class:`UnreadableRecord`, and (a group consumer) a record of a batch too large to
        fetch as an :class:`OversizeRecord`, the position already past it."""
        try:
            got = poll_client(self._client, timeout_ms, max_records)
        except CorruptBatch as exc:  # no position moves: the watch fetches that batch itself once it stalls
            log.warning("%s; the batch is read apart once its partition stalls", exc)
            got = {}
        out: list[Fetched] = [r for records in got.values() for r in records]
        if self._watch is None:
            return out
        return self._follow_on(out + self._watch.observe(self._client))

    def _follow_on(self, fetched: list[Fetched]) -> list[Fetched]:
        """Every partition's records in offset order with none skipped: a record after a gap is preceded by the
        gap's records, read apart (kafka-python can move a position past records it never hands out, e.g. before
        one it cannot decode). A gap with nothing stored in it (compaction, transaction markers) stays a gap."""
        assigned = {Partition(tp.topic, tp.partition) for tp in self._client.assignment()}
        self._next = {p: o for p, o in self._next.items() if p in assigned}  # revoked: forgotten
        out: list[Fetched] = []
        for r in fetched:
            p, expected = r.topic_partition, self._next.get(r.topic_partition)
            if expected is not None and r.offset > expected:
                missed = self._watch.direct.between(self._client, p, expected, r.offset)
                if missed:
                    log.warning("%s/%s: %d records skipped by the client read apart", *p, len(missed))
                out += missed or []
            out.append(r)
            self._next[p] = r.offset + 1
        return out

    def stalls(self, after_s: float) -> list[Stall]:
        """Assigned, unpaused partitions with records to read whose position has not moved for ``after_s``
        seconds (a group consumer; a reader reports none)."""
        return [] if self._watch is None else self._watch.stalls(after_s)

    def paused(self) -> set[Partition]:
        with mapped():
            return {Partition(tp.topic, tp.partition) for tp in self._client.paused()}

    def pause(self, *partitions: Partition) -> None:
        with mapped():
            self._client.pause(*map(clients.to_client, partitions))

    def resume(self, *partitions: Partition) -> None:
        with mapped():
            self._client.resume(*map(clients.to_client, partitions))

    # -- positions and offsets -----------------------------------------------------------------------------------
    def position(self, partition: Partition) -> int:
        with mapped():
            return self._client.position(clients.to_client(partition))

    def seek(self, partition: Partition, offset: int) -> None:
        self._next.pop(partition, None)
        with mapped():
            self._client.seek(clients.to_client(partition), offset)

    def seek_to_beginning(self, *partitions: Partition) -> None:
        for p in partitions:
            self._next.pop(p, None)
        with mapped():
            self._client.seek_to_beginning(*map(clients.to_client, partitions))

    def commit(self, offsets: Mapping[Partition, int]) -> None:
        """Commit, per partition, the offset of the next record to read (raises :class:`CommitFailed` when a
        rebalance took a partition first)."""
        from kafka.structs import OffsetAndMetadata

        with mapped():
            self._client.commit({clients.to_client(p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})

    def end_offsets(self, partitions: Iterable[Partition], timeout_ms: int | None = None) -> dict[Partition, int]:
        """The offset after the last record of each partition; raises unless the broker answers in time."""
        with mapped():
            ends = self._client.end_offsets([clients.to_client(p) for p in partitions], timeout_ms=timeout_ms)
        return {Partition(tp.topic, tp.partition): end for tp, end in ends.items()}

    def offsets_for_times(self, times_ms: Mapping[Partition, int]) -> dict[Partition, int | None]:
        """Per partition, the first offset whose timestamp is at or after the time; None when there is none."""
        with mapped():
            found = self._client.offsets_for_times({clients.to_client(p): t for p, t in times_ms.items()})
        return {Partition(tp.topic, tp.partition): None if hit is None else hit.offset for tp, hit in found.items()}

    def lag(self, topic: str, timeout_ms: int | None = None) -> int | None:
        """Records behind the end of ``topic`` over its assigned partitions (None: none assigned). It asks for the
        end offsets of every partition of the topic, so it also proves that the broker answers."""
        return client_lag(self._client, topic, timeout_ms)

    def backlog(self, topic: str, timeout_ms: int | None = None) -> Backlog:
        """The group's records on ``topic`` that no member has committed past (a group consumer). The committed
        offsets come through an admin client of its own: kafka-python's consumer, asked for them while it joins
        its group, starts the join again, and again (seen on Tansu: it never got its partitions)."""
        from kafka import TopicPartition

        if self._settings is None:
            raise ValueError("backlog needs a group consumer")
        with mapped():
            tps = [TopicPartition(topic, p) for p in sorted(self._client.partitions_for_topic(topic) or ())]
            ends = self._client.end_offsets(tps, timeout_ms=timeout_ms)
            firsts = self._client.beginning_offsets(tps, timeout_ms=timeout_ms)
            self._admin = self._admin or clients.admin_client(self._settings)
            group = self._settings.group_id
            done = self._admin.list_group_offsets(group).get(group, {})
        committed = tuple(o.offset if (o := done.get(tp)) is not None and o.offset >= 0 else None for tp in tps)
        behind = sum(max(0, ends[tp] - (firsts[tp] if c is None else c)) for tp, c in zip(tps, committed, strict=True))
        return Backlog(behind, committed)

    def close(self, autocommit: bool = False) -> None:
        self.joined = False  # (a closed member has left its group)
        with mapped():
            try:
                self._client.close(autocommit=autocommit)
            finally:  # (an admin client that fails to close leaves the consumer closed all the same)
                if self._admin is not None:
                    self._admin.close()


def client_lag(client, topic: str, timeout_ms: int | None = None) -> int | None:
    """:meth:`Consumer.lag` on a kafka-python consumer."""
    from kafka import TopicPartition

    with mapped():
        known = client.partitions_for_topic(topic) or {0}
        ends = client.end_offsets([TopicPartition(topic, p) for p in sorted(known)], timeout_ms=timeout_ms)
        assigned = [tp for tp in client.assignment() if tp.topic == topic]
        if not assigned:
            return None
        return sum(max(0, ends[tp] - client.position(tp)) for tp in assigned)


def consumer(settings: KafkaSettings) -> Consumer:
    """A member of ``settings.group_id``: manual commits, from the earliest offset of a new group."""
    with mapped():
        return Consumer(clients.consumer_client(settings), Watch(settings), settings)


def client_reader(settings: KafkaSettings) -> Consumer:
    """A reader on kafka-python's own fetcher (behind SASL, which :func:`gateway.bus.batch_reader.reader` cannot
    speak, and to check that reader against)."""
    with mapped():
        return Consumer(clients.reader_client(settings))
