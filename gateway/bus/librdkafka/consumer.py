"""The consumer on librdkafka (confluent-kafka), the default engine.

A group member stores an offset only once its record's outcome is acknowledged (``enable.auto.offset.store``
off): :meth:`RdConsumer.commit` stores and commits it, and librdkafka commits what is stored when partitions go
and at close, so a rebalance loses no acknowledged outcome. Rebalance callbacks run inside :meth:`_fetch`, on the
caller's thread. Positions: librdkafka's own, or, before a partition's first record is handed out, where it
starts (the offset sought or assigned, else the group's commit, else the earliest). Health comes from
librdkafka's statistics and error callbacks (:mod:`gateway.bus.librdkafka.health`)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from gateway.bus.consumer import Consumer
from gateway.bus.librdkafka import config
from gateway.bus.librdkafka.errors import from_error, mapped
from gateway.bus.librdkafka.health import ClientHealth
from gateway.bus.librdkafka.message import records, views
from gateway.bus.librdkafka.offsets import OffsetQueries
from gateway.bus.rebalance import Rebalance
from gateway.bus.records import Fetched, Partition, Polled
from gateway.core.kafka_settings import KafkaSettings

log = logging.getLogger("lastmile.bus")
events = logging.getLogger(f"{config.LOGGER}.events")  # (the command line shows each kind once a minute)
OFFSET_BEGINNING, OFFSET_END, INVALID = -2, -1, -1001  # librdkafka's logical offsets
QUIET = frozenset({"_PARTITION_EOF", "_TRANSPORT", "_ALL_BROKERS_DOWN", "_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART"})


LEAVE_S = 5.0  # longest a closing member polls for its revocation before closing anyway
SETTLE_S = 0.3  # and at least this long, so that a rebalance event already on its way is served by a poll


class RdConsumer(Consumer):
    engine = "librdkafka"

    def __init__(self, settings: KafkaSettings, group: bool) -> None:
        from confluent_kafka import Consumer as Client

        super().__init__(settings, group)
        self.health = ClientHealth()
        conf = config.consumer(settings, group)
        conf.update(stats_cb=self.health.on_stats, error_cb=self.health.on_error)
        with mapped():
            self._c = Client(conf)
        self._joined = False
        self._joined_at = 0  # the statistics reports taken when a rebalance callback last ran
        self._paused: set[Partition] = set()
        self._start: dict[Partition, int] = {}  # where a partition starts before its first record is handed out
        self._timeout_s = settings.request_timeout_ms / 1000
        self._offsets: OffsetQueries | None = None  # questions about partitions, asked apart from the fetches
        self._subscribed = False  # a group member by subscription: it unsubscribes before it closes

    # -- what is read ----------------------------------------------------------------------------------------
    def subscribe(self, topics: list[str], listener: Rebalance | None = None) -> None:
        hooks = listener or Rebalance()
        cooperative = (self.settings.assignment_strategy or "cooperative-sticky") == "cooperative-sticky"

        def assigned(client, tps) -> None:
            self._joined, self._joined_at = True, self.health.reports
            if cooperative:
                client.incremental_assign(tps)
            else:
                client.assign(tps)
            if tps:  # librdkafka keeps a partition's pause through losing it and getting it back: one handed
                client.resume(tps)  # out starts unpaused, as the bus's own record of paused ones says
            hooks.on_assigned(_ours(tps))

        def revoked(_, tps) -> None:
            self._joined, self._joined_at = False, self.health.reports
            self._forget(ours := _ours(tps))
            hooks.on_revoked(ours)

        def lost(_, tps) -> None:
            self._joined, self._joined_at = False, self.health.reports
            self._forget(ours := _ours(tps))
            hooks.lost_hook(ours)

        with mapped():
            self._c.subscribe(topics, on_assign=assigned, on_revoke=revoked, on_lost=lost)
        self._subscribed = True

    def assign(self, partitions: Iterable[Partition]) -> None:
        from confluent_kafka import TopicPartition

        parts = [Partition(*p) for p in partitions]
        self._start = {p: o for p, o in self._start.items() if p in set(parts)}
        with mapped():
            self._c.assign([TopicPartition(*p, self._start.get(p, INVALID)) for p in parts])

    def assignment(self) -> set[Partition]:
        with mapped():
            return set(_ours(self._c.assignment()))

    def partitions(self, topic: str, timeout_ms: int | None = None) -> set[int]:
        return self._queries().partitions(topic, self._timeout_s if timeout_ms is None else timeout_ms / 1000)

    @property
    def joined(self) -> bool:
        """Handed its partitions (none, too) by the group's last rebalance, and no rebalance under way since, as
        librdkafka's statistics reported after that tell (a cooperative rebalance need revoke nothing from this
        member, so no callback says it started)."""
        later = self.health.reports > self._joined_at + 1  # (the first report after a callback may predate it)
        return self._joined and not (later and self.health.steady is False)

    # -- flow --------------------------------------------------------------------------------------------------
    def _fetch(self, timeout_ms: int, max_records: int) -> list[Fetched]:
        return records(self._consume(timeout_ms, max_records), self._event)

    def _fetch_views(self, timeout_ms: int, max_records: int) -> Polled:
        return views(self._consume(timeout_ms, max_records), self._event)

    def _consume(self, timeout_ms: int, max_records: int) -> list:
        with mapped():
            return self._c.consume(max_records, timeout_ms / 1000)

    def _event(self, error: object) -> None:
        """An error event among the records: fatal ones raise, the group's own end this member's generation, the
        rest (a broker down, an unknown topic while it is made) are health's."""
        if error.fatal():
            raise from_error(error)
        if error.name() in ("_MAX_POLL_EXCEEDED", "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"):
            self._joined = False
        if error.name() not in QUIET:
            events.warning("%s: %s", error.name(), error.str())
        self.health.last_error = f"{error.name()}: {error.str()}"

    def paused(self) -> set[Partition]:
        return set(self._paused)

    def pause(self, *partitions: Partition) -> None:
        from confluent_kafka import TopicPartition

        with mapped():
            self._c.pause([TopicPartition(*p) for p in partitions])
        self._paused |= set(partitions)

    def resume(self, *partitions: Partition) -> None:
        from confluent_kafka import TopicPartition

        with mapped():
            self._c.resume([TopicPartition(*p) for p in partitions])
        self._paused -= set(partitions)

    def known_end(self, partition: Partition, since: float) -> int | None:
        """The last stable offset of librdkafka's statistics, unless a reply was refused as oversize since
        ``since`` (the statistics then hold the watermark of the last fetch that came through)."""
        state = self.health.partitions.get(partition)
        if state is None or state.end < 0 or self.health.last_oversize >= since:
            return None
        return state.end

    def stall_cause(self, since: float) -> str:
        if self.health.last_oversize < since:
            return ""
        return (
            "librdkafka refused a fetch reply over its limit: a batch there is larger than kafka.max_message_bytes "
            f"({self.settings.max_message_bytes}) allows"
        )

    # -- positions and offsets -----------------------------------------------------------------------------------
    def position(self, partition: Partition) -> int:
        from confluent_kafka import TopicPartition

        with mapped():
            (got,) = self._c.position([TopicPartition(*partition)])
        if got.offset >= 0:
            return got.offset
        start = self._start.get(partition)
        if start is None or start < 0:  # never handed a record out, nor sought: where librdkafka starts it
            state = self.health.partitions.get(partition)
            if state is not None and state.next_offset >= 0:  # librdkafka's own (no request: its connection may
                return state.next_offset  # be failing on an oversize reply)
            start = self._resolve(partition, start)
            self._start[partition] = start
        return start

    def _resolve(self, p: Partition, logical: int | None) -> int:
        low, high = self.watermarks([p])[p]
        if logical == OFFSET_END:
            return high
        if logical is None and self.group:
            committed = self.group_offsets([p]).get(p)
            if committed is not None:
                return committed
        return low

    def seek(self, partition: Partition, offset: int) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        tp = TopicPartition(*partition, offset)
        self._start[partition] = offset
        try:
            self._c.seek(tp)
        except KafkaException as exc:  # not fetched yet (just assigned): a reader starts it there instead
            if self.group:
                raise from_error(exc.args[0]) from exc
            with mapped():
                self._c.incremental_unassign([TopicPartition(*partition)])
                self._c.incremental_assign([tp])

    def seek_to_beginning(self, *partitions: Partition) -> None:
        for p in partitions or tuple(self.assignment()):
            self.seek(p, OFFSET_BEGINNING)

    def commit(self, offsets: Mapping[Partition, int]) -> None:
        from confluent_kafka import TopicPartition

        held = self.assignment()
        tps = [TopicPartition(*p, o) for p, o in offsets.items() if p in held]
        if not tps:
            return
        with mapped():
            self._c.store_offsets(offsets=tps)
            answered = self._c.commit(offsets=tps, asynchronous=False)
        for tp in answered or ():
            if tp.error is not None:
                raise from_error(tp.error)

    def watermarks(self, partitions: Iterable[Partition], timeout_ms: int | None = None) -> dict[Partition, tuple]:
        parts = list(partitions)
        lows = self._list_offsets(parts, OFFSET_BEGINNING, timeout_ms)
        highs = self._list_offsets(parts, OFFSET_END, timeout_ms)
        return {p: (lows[p], highs[p]) for p in parts}

    def end_offsets(self, partitions: Iterable[Partition], timeout_ms: int | None = None) -> dict[Partition, int]:
        return self._list_offsets(list(partitions), OFFSET_END, timeout_ms)

    def _list_offsets(self, parts: list[Partition], which: int, timeout_ms: int | None) -> dict[Partition, int]:
        timeout_s = self._timeout_s if timeout_ms is None else timeout_ms / 1000
        return self._queries().ask(parts, which == OFFSET_BEGINNING, timeout_s)

    def _queries(self) -> OffsetQueries:
        """Questions about partitions, on a connection with no fetch on it (made when first asked)."""
        if self._offsets is None:
            self._offsets = OffsetQueries(self.settings)
        return self._offsets

    def offsets_for_times(self, times_ms: Mapping[Partition, int]) -> dict[Partition, int | None]:
        from confluent_kafka import TopicPartition

        parts = list(times_ms)
        with mapped():
            found = self._c.offsets_for_times([TopicPartition(*p, times_ms[p]) for p in parts], self._timeout_s)
        out: dict[Partition, int | None] = {}
        for p, tp in zip(parts, found, strict=True):
            if tp.error is not None:
                raise from_error(tp.error)
            out[p] = tp.offset if tp.offset >= 0 else None
        return out

    def group_offsets(self, partitions: list[Partition], timeout_ms: int | None = None) -> dict[Partition, int | None]:
        from confluent_kafka import TopicPartition

        timeout_s = self._timeout_s if timeout_ms is None else timeout_ms / 1000
        with mapped():
            found = self._c.committed([TopicPartition(*p) for p in partitions], timeout_s)
        return {Partition(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None for tp in found}

    def close(self, autocommit: bool = False) -> None:
        """Leave the group (committing only what was stored: acknowledged outcomes) and stop the client.

        A member first unsubscribes and polls until its partitions are revoked (at most ``LEAVE_S``), so that no
        rebalance callback runs inside librdkafka's close: one that did (an assignment arriving as the member
        closed, cooperative-sticky) hung ``close`` for good while holding the GIL, freezing the whole process (a
        CI run's replay gateway, stopped 0.1 s after it joined; librdkafka issue 4527, whose workaround this is).
        Records polled meanwhile are dropped: uncommitted, their next owner reads them."""
        self._joined = False
        with mapped():
            if self._subscribed:  # (a join may be under way with nothing assigned yet: it settles here too)
                self._c.unsubscribe()
                start = time.monotonic()
                while time.monotonic() - start < LEAVE_S:
                    self._c.consume(100, 0.1)  # serves a revocation (or a late assignment) where callbacks are safe
                    if not self._c.assignment() and time.monotonic() - start >= SETTLE_S:
                        break
            self._c.close()

    def _forget(self, partitions: list[Partition]) -> None:
        self._paused -= set(partitions)
        for p in partitions:
            self._start.pop(p, None)


def _ours(tps) -> list[Partition]:
    return [Partition(tp.topic, tp.partition) for tp in tps]
