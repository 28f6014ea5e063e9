"""Kafka offsets the gateway may commit: per partition, below the first message still in flight.

Messages finish out of order (a pool of workers); committing up to the first one not yet done means a crash
redelivers (at-least-once) and never skips. Partitions revoked in a rebalance are forgotten (no commit there).
"""

from __future__ import annotations

import logging

from gateway.bus import Partition, Rebalance

log = logging.getLogger("lastmile.gateway")


class OffsetTracker:
    """Per partition: offsets in flight and the highest seen; what is safe to commit is below the first in flight."""

    def __init__(self) -> None:
        self.in_flight: dict[object, set[int]] = {}
        self.next_offset: dict[object, int] = {}
        self.committed: dict[object, int] = {}
        self.peak = 0  # the most messages in flight at once so far

    def start(self, tp: object, offset: int) -> None:
        self.in_flight.setdefault(tp, set()).add(offset)
        self.next_offset[tp] = max(self.next_offset.get(tp, 0), offset + 1)
        self.peak = max(self.peak, self.count)

    def finish(self, tp: object, offset: int) -> None:
        self.in_flight.get(tp, set()).discard(offset)

    def committable(self) -> dict[object, int]:
        out = {}
        for tp, nxt in self.next_offset.items():
            pending = self.in_flight.get(tp)
            safe = min(pending) if pending else nxt
            if safe > self.committed.get(tp, -1):
                out[tp] = safe
        return out

    def mark_committed(self, offsets: dict[object, int]) -> None:
        self.committed.update(offsets)

    def forget(self, tps: list) -> None:
        for tp in tps:
            self.in_flight.pop(tp, None)
            self.next_offset.pop(tp, None)
            self.committed.pop(tp, None)

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.in_flight.values())


def rebalance_listener(tracker: OffsetTracker) -> Rebalance:
    """Partitions that go (revoked, or lost: the group dropped this member) are forgotten uncommitted; their next
    owner redelivers what was done since the last commit (the loop commits every round). Nothing is committed
    here: kafka-python 3 runs these hooks on its IO thread, where a blocking commit raises RuntimeError and the
    poll then raised "User rebalance callback throws an error", which ended the gateway at a rebalance."""

    def revoked(partitions: list[Partition]) -> None:
        tracker.forget(partitions)

    def lost(partitions: list[Partition]) -> None:
        if partitions:
            log.warning("the group dropped this member: %d partitions lost uncommitted (redelivered)", len(partitions))
        tracker.forget(partitions)

    return Rebalance(on_revoked=revoked, on_lost=lost)
