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
    """``on_revoked`` runs before the group takes partitions away, ``on_assigned`` after it hands new ones,
    ``on_lost`` when the group has already taken them: it dropped this member (its poll loop stalled past
    ``max_poll_interval_ms``, or its process past the session); without ``on_lost``, ``on_revoked`` runs.
    kafka-python 3 runs them on its IO thread, where a blocking call such as a commit raises RuntimeError. It calls
    the methods below with its own partition type and looks each up by name: a missing ``on_partitions_lost`` made
    its ``poll`` raise, which ended the gateway that had merely been late."""

    on_revoked: Hook = _nothing
    on_assigned: Hook = _nothing
    on_lost: Hook | None = None

    def on_partitions_revoked(self, revoked: object) -> None:
        self.on_revoked(_ours(revoked))

    def on_partitions_assigned(self, assigned: object) -> None:
        self.on_assigned(_ours(assigned))

    def on_partitions_lost(self, lost: object) -> None:
        self.lost_hook(_ours(lost))

    @property
    def lost_hook(self) -> Hook:
        """What runs for lost partitions: ``on_lost``, else ``on_revoked``."""
        return self.on_lost or self.on_revoked


def _ours(partitions: object) -> list[Partition]:
    return [Partition(tp.topic, tp.partition) for tp in partitions]


def observed(hooks: Rebalance, joined: Callable[[bool], None]) -> Rebalance:
    """``hooks``, also telling ``joined`` whether the member is in a generation of its group: False once a join
    starts (kafka-python revokes before every join, the first too) or its partitions are lost, True once the
    group hands it partitions (none, too)."""

    def revoked(partitions: list[Partition]) -> None:
        joined(False)
        hooks.on_revoked(partitions)

    def assigned(partitions: list[Partition]) -> None:
        joined(True)
        hooks.on_assigned(partitions)

    def lost(partitions: list[Partition]) -> None:
        joined(False)
        hooks.lost_hook(partitions)

    return Rebalance(on_revoked=revoked, on_assigned=assigned, on_lost=lost)
