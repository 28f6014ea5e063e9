"""The consumer on librdkafka (confluent-kafka), the default engine.

A group member stores an offset only once its record's outcome is acknowledged: :meth:`RdConsumer.commit` stores
and commits it, and librdkafka commits what is stored when partitions go and at close. Questions about partitions
(ends, first offsets) go on an admin client's connection with no fetch on it: a broker serves one connection's
requests in order, so a question behind a fetch waits it out, and a reply over the receive limit breaks them all."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from gateway.bus.consumer import Consumer, Rebalance
from gateway.bus.errors import NoAnswer
from gateway.bus.librdkafka import config
from gateway.bus.librdkafka.errors import from_error, mapped
from gateway.bus.librdkafka.health import ClientHealth
from gateway.bus.librdkafka.message import records, views
from gateway.bus.records import Fetched, Partition, Polled, partitions_of
from gateway.core.kafka_settings import KafkaSettings

# the command line shows each kind once a minute
events = logging.getLogger(f"{config.LOGGER}.events")
# librdkafka's logical offsets
OFFSET_BEGINNING, OFFSET_END, INVALID = -2, -1, -1001
QUIET = frozenset({"_PARTITION_EOF", "_TRANSPORT", "_ALL_BROKERS_DOWN", "_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART"})
# a closing member polls for its revocation this long at most, and at least SETTLE_S (an event on its way is served)
LEAVE_S, SETTLE_S = 5.0, 0.3


def _tps(partitions: Iterable[Partition], offsets: Mapping[Partition, int] | None = None) -> list:
    from confluent_kafka import TopicPartition

    return [TopicPartition(*p) if offsets is None else TopicPartition(*p, offsets[p]) for p in partitions]


class RdConsumer(Consumer):
    engine = "librdkafka"

    def __init__(self, settings: KafkaSettings, group: bool) -> None:
        from confluent_kafka import Consumer as Client

        super().__init__(settings, group)
        self.health = ClientHealth()
        conf = {**config.consumer(settings, group), "stats_cb": self.health.on_stats, "error_cb": self.health.on_error}
        with mapped():
            self._c = Client(conf)
        # the statistics reports taken when a rebalance callback last ran
        self._joined, self._joined_at = False, 0
        self._paused: set[Partition] = set()
        # where a partition starts before its first record is handed out
        self._start: dict[Partition, int] = {}
        self._timeout_s = settings.request_timeout_ms / 1000
        self._admin = None
        # a member by subscription unsubscribes before it closes
        self._subscribed = False

    def subscribe(self, topics: list[str], listener: Rebalance | None = None) -> None:
        hooks = listener or Rebalance()
        cooperative = (self.settings.assignment_strategy or "cooperative-sticky") == "cooperative-sticky"

        def assigned(client, tps) -> None:
            self._joined, self._joined_at = True, self.health.reports
            client.incremental_assign(tps) if cooperative else client.assign(tps)
            # librdkafka keeps a pause through losing a partition and getting it back: unpaused, as the bus's record
            if tps:
                client.resume(tps)
            hooks.on_assigned(partitions_of(tps))

        def gone(hook):
            def callback(_, tps) -> None:
                self._joined, self._joined_at = False, self.health.reports
                ours = partitions_of(tps)
                self._paused -= set(ours)
                for p in ours:
                    self._start.pop(p, None)
                hook(ours)

            return callback

        with mapped():
            self._c.subscribe(
                topics, on_assign=assigned, on_revoke=gone(hooks.on_revoked), on_lost=gone(hooks.lost_hook)
            )
        self._subscribed = True

    def assign(self, partitions: Iterable[Partition]) -> None:
        parts = [Partition(*p) for p in partitions]
        self._start = {p: o for p, o in self._start.items() if p in set(parts)}
        with mapped():
            self._c.assign(_tps(parts, {p: self._start.get(p, INVALID) for p in parts}))

    def assignment(self) -> set[Partition]:
        with mapped():
            return set(partitions_of(self._c.assignment()))

    def partitions(self, topic: str, timeout_ms: int | None = None) -> set[int]:
        with mapped():
            found = self._admin_client().list_topics(topic, self._seconds(timeout_ms)).topics.get(topic)
        return set() if found is None or found.error is not None else set(found.partitions)

    @property
    def joined(self) -> bool:
        """Handed its partitions by the group's last rebalance, and none under way since as the statistics after it
        tell (a cooperative rebalance need revoke nothing, so no callback says it started)."""
        later = self.health.reports > self._joined_at + 1
        return self._joined and not (later and self.health.steady is False)

    def _fetch(self, timeout_ms: int, max_records: int) -> list[Fetched]:
        return records(self._consume(timeout_ms, max_records), self._event)

    def _fetch_views(self, timeout_ms: int, max_records: int) -> Polled:
        return views(self._consume(timeout_ms, max_records), self._event)

    def _consume(self, timeout_ms: int, max_records: int) -> list:
        with mapped():
            return self._c.consume(max_records, timeout_ms / 1000)

    def _event(self, error: object) -> None:
        """An error among the records: a fatal one raises, the group's end the generation, the rest are logged."""
        if error.fatal():
            raise from_error(error)
        if error.name() in ("_MAX_POLL_EXCEEDED", "UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION"):
            self._joined = False
        if error.name() not in QUIET:
            events.warning("%s: %s", error.name(), error.str())

    def paused(self) -> set[Partition]:
        return set(self._paused)

    def pause(self, *partitions: Partition) -> None:
        with mapped():
            self._c.pause(_tps(partitions))
        self._paused |= set(partitions)

    def resume(self, *partitions: Partition) -> None:
        with mapped():
            self._c.resume(_tps(partitions))
        self._paused -= set(partitions)

    def known_end(self, partition: Partition, since: float) -> int | None:
        """The statistics' last stable offset, unless a reply was refused as oversize since ``since`` (then stale)."""
        state = self.health.partitions.get(partition)
        return None if state is None or state.end < 0 or self.health.last_oversize >= since else state.end

    def stall_cause(self, since: float) -> str:
        if self.health.last_oversize < since:
            return ""
        limit = self.settings.max_message_bytes
        return (
            f"librdkafka refused a fetch reply over its limit: a batch there is over kafka.max_message_bytes ({limit})"
        )

    def position(self, partition: Partition) -> int:
        with mapped():
            (got,) = self._c.position(_tps([partition]))
        if got.offset >= 0:
            return got.offset
        start = self._start.get(partition)
        if start is not None and start >= 0:
            return start
        # never handed a record out, nor sought: where its statistics say librdkafka starts it
        state = self.health.partitions.get(partition)
        if state is not None and state.next_offset >= 0:
            return state.next_offset
        low, high = self.watermarks([partition])[partition]
        committed = self.group_offsets([partition]).get(partition) if start is None and self.group else None
        self._start[partition] = high if start == OFFSET_END else low if committed is None else committed
        return self._start[partition]

    def seek(self, partition: Partition, offset: int) -> None:
        from confluent_kafka import KafkaException

        self._start[partition] = offset
        try:
            self._c.seek(_tps([partition], {partition: offset})[0])
        except KafkaException as exc:
            # not fetched yet (just assigned): a reader starts it there instead
            if self.group:
                raise from_error(exc.args[0]) from exc
            with mapped():
                self._c.incremental_unassign(_tps([partition]))
                self._c.incremental_assign(_tps([partition], {partition: offset}))

    def seek_to_beginning(self, *partitions: Partition) -> None:
        for p in partitions or tuple(self.assignment()):
            self.seek(p, OFFSET_BEGINNING)

    def commit(self, offsets: Mapping[Partition, int]) -> None:
        assigned = self.assignment()
        held = [p for p in offsets if p in assigned]
        if not held:
            return
        with mapped():
            self._c.store_offsets(offsets=_tps(held, offsets))
            answered = self._c.commit(offsets=_tps(held, offsets), asynchronous=False)
        for tp in answered or ():
            if tp.error is not None:
                raise from_error(tp.error)

    def watermarks(self, partitions: Iterable[Partition], timeout_ms: int | None = None) -> dict[Partition, tuple]:
        parts = list(partitions)
        lows, highs = self._list_offsets(parts, True, timeout_ms), self._list_offsets(parts, False, timeout_ms)
        return {p: (lows[p], highs[p]) for p in parts}

    def end_offsets(self, partitions: Iterable[Partition], timeout_ms: int | None = None) -> dict[Partition, int]:
        return self._list_offsets(list(partitions), False, timeout_ms)

    def _list_offsets(self, parts: list[Partition], first: bool, timeout_ms: int | None) -> dict[Partition, int]:
        """Each partition's first offset, else its end: the last stable offset (as a read-committed consumer)."""
        from confluent_kafka import IsolationLevel
        from confluent_kafka.admin import OffsetSpec

        timeout_s, spec = self._seconds(timeout_ms), OffsetSpec.earliest() if first else OffsetSpec.latest()
        with mapped():
            futures = self._admin_client().list_offsets(
                dict.fromkeys(_tps(parts), spec),
                isolation_level=IsolationLevel.READ_COMMITTED,
                request_timeout=timeout_s,
            )
        out = {}
        for tp, future in futures.items():
            what = f"_TIMED_OUT: no offsets of {tp.topic}/{tp.partition} within {timeout_s:.1f} s"
            try:
                with mapped():
                    offset = future.result(timeout=timeout_s + 1).offset
            except TimeoutError:
                raise NoAnswer(what) from None
            # a request that timed out comes back as an answer: offset -1001, no error
            if offset < 0:
                raise NoAnswer(f"{what} (the answer held no offset)")
            out[Partition(tp.topic, tp.partition)] = offset
        return out

    def offsets_for_times(self, times_ms: Mapping[Partition, int]) -> dict[Partition, int | None]:
        parts = list(times_ms)
        with mapped():
            found = self._c.offsets_for_times(_tps(parts, times_ms), self._timeout_s)
        for tp in found:
            if tp.error is not None:
                raise from_error(tp.error)
        return {p: tp.offset if tp.offset >= 0 else None for p, tp in zip(parts, found, strict=True)}

    def group_offsets(self, partitions: list[Partition], timeout_ms: int | None = None) -> dict[Partition, int | None]:
        with mapped():
            found = self._c.committed(_tps(partitions), self._seconds(timeout_ms))
        return {Partition(tp.topic, tp.partition): tp.offset if tp.offset >= 0 else None for tp in found}

    def close(self, autocommit: bool = False) -> None:
        """Leave the group (committing only what was stored) and stop the client. A member first unsubscribes and
        polls until its partitions are revoked (at most ``LEAVE_S``): a rebalance callback inside librdkafka's close
        can hang it for good holding the GIL (librdkafka issue 4527). Records polled meanwhile are not committed."""
        self._joined = False
        with mapped():
            # (a join may be under way with nothing assigned yet: it settles here too)
            if self._subscribed:
                self._c.unsubscribe()
                start = time.monotonic()
                while time.monotonic() - start < LEAVE_S:
                    self._c.consume(100, 0.1)
                    if not self._c.assignment() and time.monotonic() - start >= SETTLE_S:
                        break
            self._c.close()

    def _seconds(self, timeout_ms: int | None) -> float:
        return self._timeout_s if timeout_ms is None else timeout_ms / 1000

    def _admin_client(self):
        """An admin client for questions about partitions, made when first asked (one with nothing queued is falsy)."""
        if self._admin is None:
            self._admin = config.admin_client(self.settings)
        return self._admin
