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
    """``on_revoked`` runs before the group takes partitions away, ``on_assigned`` after it hands new ones (with a
    cooperative assignor, only the partitions that move), ``on_lost`` when the group has already taken them: it
    dropped this member (its poll loop stalled past ``max_poll_interval_ms``, or its process past the session);
    without ``on_lost``, ``on_revoked`` runs. librdkafka runs them inside the member's poll, on its thread;
    kafka-python on its IO thread, where a blocking call such as a commit raises RuntimeError, so the hooks the
    gateway gives commit nothing (:func:`gateway.stream.offsets.rebalance_listener`)."""

    on_revoked: Hook = _nothing
    on_assigned: Hook = _nothing
    on_lost: Hook | None = None

    @property
    def lost_hook(self) -> Hook:
        """What runs for lost partitions: ``on_lost``, else ``on_revoked``."""
        return self.on_lost or self.on_revoked
