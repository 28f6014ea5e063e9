"""A member of a group that holds no partition of its topic while the group's records there wait: found and named.

The stall watch (:mod:`gateway.stream.stalls`) sees only the partitions a member holds. A member that holds none is
idle, which is normal when a group has more members than partitions, and stuck when the group has records on the
topic that no member commits past: :class:`IdleWatch` reports it (for readiness: which topic, how many records,
for how long) once the group's committed offsets there have not moved for ``after_s``. It does not rejoin the
group (on Tansu, rejoining kept a group in its rebalance: CHANGELOG.md); the replay has a remedy of its own
(:class:`gateway.batch.kafka_replay.ReplayGateway`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from gateway.bus import Consumer, Partition
from gateway.core.wording import counted


@dataclass(frozen=True)
class Backlog:
    """A group's records on a topic that no member has committed past: per partition, its end less the group's
    committed offset (its first offset where the group committed none); ``committed``: per partition, in partition
    order, None where the group committed none."""

    records: int
    committed: tuple[int | None, ...]


def backlog(consumer: Consumer, topic: str, timeout_ms: int | None = None) -> Backlog:
    """The records of ``consumer``'s group on ``topic`` that no member has committed past (a group member)."""
    if not consumer.group:
        raise ValueError("backlog needs a group member")
    parts = [Partition(topic, p) for p in sorted(consumer.partitions(topic, timeout_ms))]
    marks = consumer.watermarks(parts, timeout_ms)
    committed = tuple(consumer.group_offsets(parts, timeout_ms).get(p) for p in parts)
    behind = sum(max(0, marks[p][1] - (marks[p][0] if c is None else c)) for p, c in zip(parts, committed, strict=True))
    return Backlog(behind, committed)


@dataclass(frozen=True)
class Unassigned:
    """This member holds no partition of ``topic`` while its group's backlog there has not moved for ``for_s``;
    ``joining``: it has not got through its join of the group in that time either."""

    topic: str
    group: str
    behind: int
    for_s: float
    joining: bool = False

    def __str__(self) -> str:
        joining = " (its join of the group not done)" if self.joining else ""
        return (
            f"holds no partition of {self.topic}{joining}; group {self.group} has {counted(self.behind, 'record')} "
            f"there with no commit for {self.for_s:.0f} s"
        )


class IdleWatch:
    """``after_s``: how long a member of a generation may hold nothing while the backlog waits; ``joining_after_s``:
    how long one still joining may (a join takes a rebalance timeout or more on a loaded machine; one that never
    ends is stuck too)."""

    def __init__(self, topic: str, group: str, after_s: float, joining_after_s: float | None = None) -> None:
        self.topic, self.group, self.after_s = topic, group, after_s
        self.joining_after_s = after_s if joining_after_s is None else joining_after_s
        # since when this member has been idle with the same unmoved backlog, and that backlog's commits
        self._since: float | None = None
        self._committed: tuple[int | None, ...] | None = None

    def observe(self, backlog: Backlog | None, joined: bool = True, now: float | None = None) -> Unassigned | None:
        """After a probe: ``backlog`` is None while this member holds a partition of the topic; ``joined``: it is
        in a generation of its group (not joining). What is stuck, once the member has been idle with records
        waiting and no commit moving for ``after_s`` (``joining_after_s`` while it joins)."""
        now = time.monotonic() if now is None else now
        if backlog is None or backlog.records <= 0:
            self._since = self._committed = None
            return None
        if self._since is None or backlog.committed != self._committed:
            self._since, self._committed = now, backlog.committed
        waited = now - self._since
        if waited < (self.after_s if joined else self.joining_after_s):
            return None
        return Unassigned(self.topic, self.group, backlog.records, waited, joining=not joined)
