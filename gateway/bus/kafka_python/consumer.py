"""The consumer on kafka-python, the pure-Python engine (``kafka.client: kafka-python``).

Its public API, and in :mod:`gateway.bus.kafka_python.fetch` the two workarounds that read kafka-python's private
fetcher fields. kafka-python tells of a fetch that failed on a reply over its limit only in its log, so this
engine reads the ``kafka.consumer.fetcher`` logger's records (:class:`_FetchFailures`, which must stay enabled at
ERROR) for the stall watch; and since it can move a position past records it never hands out (before one it
cannot decode), every partition's offsets are checked to follow on, a gap read apart
(:meth:`gateway.bus.apart.DirectReader.between`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from gateway.bus.consumer import Consumer
from gateway.bus.errors import BusError, CorruptBatch
from gateway.bus.kafka_python import config
from gateway.bus.kafka_python.errors import mapped
from gateway.bus.kafka_python.fetch import poll_client
from gateway.bus.rebalance import Hook, Rebalance
from gateway.bus.records import Fetched, Partition
from gateway.core.kafka_settings import KafkaSettings

log = logging.getLogger("lastmile.bus")
FETCHER_LOG = "kafka.consumer.fetcher"


class _FetchFailures(logging.Filter):
    """kafka-python tells of a failed fetch only in its log (``Fetch to node %s failed: %s``): note when one failed
    on a reply over the client's ``receive_message_max_bytes`` (an oversize batch in it). Passes every record."""

    def __init__(self) -> None:
        super().__init__()
        self.last_oversize = float("-inf")  # time.monotonic() of the latest

    def filter(self, record: logging.LogRecord) -> bool:
        from kafka.errors import InvalidReceiveError

        args = record.args if isinstance(record.args, tuple) else ()
        if len(args) == 2 and isinstance(args[1], InvalidReceiveError):
            self.last_oversize = time.monotonic()
        return True


FETCH_FAILURES = _FetchFailures()


class Listener:
    """The hooks in kafka-python's listener shape: it calls these three by name, with its own partition type, on
    its IO thread (where a blocking call such as a commit raises). A missing ``on_partitions_lost`` made its
    ``poll`` raise, which ended the gateway that had merely been late."""

    def __init__(self, revoked: Hook, assigned: Hook, lost: Hook) -> None:
        self.revoked, self.assigned, self.lost = revoked, assigned, lost

    def on_partitions_revoked(self, revoked: object) -> None:
        self.revoked(_ours(revoked))

    def on_partitions_assigned(self, assigned: object) -> None:
        self.assigned(_ours(assigned))

    def on_partitions_lost(self, lost: object) -> None:
        self.lost(_ours(lost))


def _register_listener() -> None:
    """kafka-python's ``subscribe`` takes only its ``ConsumerRebalanceListener``: :class:`Listener` is registered
    as one (an ABC's virtual subclass; no kafka type in its bases)."""
    from kafka import ConsumerRebalanceListener

    ConsumerRebalanceListener.register(Listener)


class KpConsumer(Consumer):
    engine = "kafka-python"

    def __init__(self, settings: KafkaSettings, group: bool) -> None:
        super().__init__(settings, group)
        if FETCH_FAILURES not in logging.getLogger(FETCHER_LOG).filters:
            logging.getLogger(FETCHER_LOG).addFilter(FETCH_FAILURES)
        with mapped():
            self._client = config.consumer_client(settings) if group else config.reader_client(settings)
        self._admin = None  # for the group's committed offsets (:meth:`group_offsets`), once asked
        self._next: dict[Partition, int] = {}  # per partition, the offset after the last record handed out
        self._joined = False

    # -- what is read ----------------------------------------------------------------------------------------
    def subscribe(self, topics: list[str], listener: Rebalance | None = None) -> None:
        hooks = listener or Rebalance()

        def revoked(partitions: list[Partition]) -> None:  # kafka-python revokes before every join, the first too
            self._joined = False
            hooks.on_revoked(partitions)

        def assigned(partitions: list[Partition]) -> None:
            self._joined = True
            hooks.on_assigned(partitions)

        def lost(partitions: list[Partition]) -> None:
            self._joined = False
            hooks.lost_hook(partitions)

        _register_listener()
        with mapped():
            self._client.subscribe(topics, listener=Listener(revoked, assigned, lost))

    def assign(self, partitions: Iterable[Partition]) -> None:
        with mapped():
            self._client.assign([_theirs(p) for p in partitions])

    def assignment(self) -> set[Partition]:
        with mapped():
            return set(_ours(self._client.assignment()))

    def partitions(self, topic: str, timeout_ms: int | None = None) -> set[int]:
        with mapped():  # (from kafka-python's metadata; it asks the broker on its own schedule, without a timeout)
            return set(self._client.partitions_for_topic(topic) or ())

    @property
    def joined(self) -> bool:
        return self._joined

    # -- flow --------------------------------------------------------------------------------------------------
    def _fetch(self, timeout_ms: int, max_records: int) -> list[Fetched]:
        try:
            got = poll_client(self._client, timeout_ms, max_records)
        except CorruptBatch as exc:  # no position moves: the watch fetches that batch itself once it stalls
            log.warning("%s; the batch is read apart once its partition stalls", exc)
            got = {}
        fetched: list[Fetched] = [r for records in got.values() for r in records]
        return self._follow_on(fetched) if self.group else fetched

    def _follow_on(self, fetched: list[Fetched]) -> list[Fetched]:
        """Every partition's records in offset order with none skipped: a record after a gap is preceded by the
        gap's records, read apart. A gap with nothing stored in it (compaction, transaction markers) stays one."""
        assigned = self.assignment()
        self._next = {p: o for p, o in self._next.items() if p in assigned}  # revoked: forgotten
        out: list[Fetched] = []
        for r in fetched:
            p, expected = r.topic_partition, self._next.get(r.topic_partition)
            if expected is not None and r.offset > expected:
                missed = self.direct.between(p, expected, r.offset)
                if missed:
                    log.warning("%s/%s: %d records skipped by the client read apart", *p, len(missed))
                out += missed or []
            out.append(r)
            self._next[p] = r.offset + 1
        return out

    def paused(self) -> set[Partition]:
        with mapped():
            return set(_ours(self._client.paused()))

    def pause(self, *partitions: Partition) -> None:
        with mapped():
            self._client.pause(*map(_theirs, partitions))

    def resume(self, *partitions: Partition) -> None:
        with mapped():
            self._client.resume(*map(_theirs, partitions))

    def last_oversize(self) -> float:
        return FETCH_FAILURES.last_oversize

    # -- positions and offsets -----------------------------------------------------------------------------------
    def position(self, partition: Partition) -> int:
        with mapped():
            return self._client.position(_theirs(partition), timeout_ms=self.settings.probe_timeout_ms)

    def seek(self, partition: Partition, offset: int) -> None:
        self._next.pop(partition, None)
        with mapped():
            self._client.seek(_theirs(partition), offset)

    def seek_to_beginning(self, *partitions: Partition) -> None:
        for p in partitions:
            self._next.pop(p, None)
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
        starts the join again, and again (seen on Tansu: it never got its partitions)."""
        group = self.settings.group_id
        with mapped():
            self._admin = self._admin or config.admin_client(self.settings)
            done = self._admin.list_group_offsets(group).get(group, {})
        out: dict[Partition, int | None] = {}
        for p in partitions:
            o = done.get(_theirs(p))
            out[p] = o.offset if o is not None and o.offset >= 0 else None
        return out

    def leader(self, partition: Partition) -> tuple[str, int]:
        cluster = self._client._client.cluster  # kafka-python keeps its metadata there; no public accessor
        node = cluster.leader_for_partition(_theirs(partition))
        broker = cluster.broker_metadata(node) if node is not None and node >= 0 else None
        if broker is None:
            raise BusError(f"no known leader for {partition.topic}/{partition.partition}")
        return broker.host, broker.port

    def close(self, autocommit: bool = False) -> None:
        self._joined = False  # (a closed member has left its group)
        with mapped():
            try:
                self._client.close(autocommit=autocommit)
            finally:  # (an admin client that fails to close leaves the consumer closed all the same)
                if self._admin is not None:
                    self._admin.close()


def _theirs(partition: Partition):
    """kafka-python's ``TopicPartition`` for one of ours (its methods check the type)."""
    from kafka import TopicPartition

    return TopicPartition(partition.topic, partition.partition)


def _ours(tps) -> list[Partition]:
    return [Partition(tp.topic, tp.partition) for tp in tps]
