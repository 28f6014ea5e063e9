"""A member of a group that holds no partition of its topic while the group's records there wait: found and named.

The stall watch (:mod:`gateway.bus.stalls`) sees only the partitions a member holds. A member that holds none is
idle, which is normal when a group has more members than partitions; it is stuck when the group has records on
the topic that no member commits past. A replay's only gateway once held no partition for the 300 s of a test
while its videos waited, and said it was ready. :class:`IdleWatch` reports such a member (for readiness: which
topic, how many records, for how long) once the group's committed offsets there have not moved for ``after_s``.

It does not rejoin the group: on Tansu, a group whose leader left kept answering its one remaining member's
SyncGroup with "rebalance in progress", and a leave-and-join every few seconds kept it there (the member held
nothing until the rejoins stopped); what a rejoin would mend on another broker could not be shown here.
The replay, whose gateway is its group's only member, has a remedy of its own: it starts that gateway again in a
fresh group (:class:`gateway.batch.kafka_replay.ReplayGateway`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from gateway.core.wording import counted


@dataclass(frozen=True)
class Backlog:
    """A group's records on a topic that no member has committed past: per partition, its end less the group's
    committed offset (its first offset where the group committed none)."""

    records: int
    committed: tuple[int | None, ...]  # per partition, in partition order; None: the group committed none


@dataclass(frozen=True)
class Unassigned:
    """This member holds no partition of ``topic`` while its group's backlog there has not moved for ``for_s``."""

    topic: str
    group: str
    behind: int
    for_s: float

    def __str__(self) -> str:
        return (
            f"holds no partition of {self.topic}; group {self.group} has {counted(self.behind, 'record')} there "
            f"with no commit for {self.for_s:.0f} s"
        )


class IdleWatch:
    def __init__(self, topic: str, group: str, after_s: float) -> None:
        self.topic, self.group, self.after_s = topic, group, after_s
        self._since: float | None = None  # since when this member has been idle with the same unmoved backlog
        self._committed: tuple[int | None, ...] | None = None

    def observe(self, backlog: Backlog | None, now: float | None = None) -> Unassigned | None:
        """After a probe: ``backlog`` is None while this member holds a partition of the topic. What is stuck, once
        ``after_s`` has passed with the member idle, records waiting and no commit moving."""
        now = time.monotonic() if now is None else now
        if backlog is None or backlog.records <= 0:
            self._since = self._committed = None
            return None
        if self._since is None or backlog.committed != self._committed:
            self._since, self._committed = now, backlog.committed
        waited = now - self._since
        return Unassigned(self.topic, self.group, backlog.records, waited) if waited >= self.after_s else None
