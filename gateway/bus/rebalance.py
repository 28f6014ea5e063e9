"""Rebalance hooks in the project's types: what to do before partitions go and after new ones come."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gateway.bus.records import Partition

Hook = Callable[[list[Partition]], None]


def _nothing(partitions: list[Partition]) -> None:
    return None


@dataclass(frozen=True)
class Rebalance:
    """``on_revoked`` runs before the group takes partitions away (commit what is done there), ``on_assigned``
    after it hands new ones. kafka-python calls the two methods below with its own partition type."""

    on_revoked: Hook = _nothing
    on_assigned: Hook = _nothing

    def on_partitions_revoked(self, revoked: object) -> None:
        self.on_revoked([Partition(tp.topic, tp.partition) for tp in revoked])

    def on_partitions_assigned(self, assigned: object) -> None:
        self.on_assigned([Partition(tp.topic, tp.partition) for tp in assigned])
