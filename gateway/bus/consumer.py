"""What every engine's consumer does, in the project's types: records, partitions and offsets in,
:class:`~gateway.bus.errors.BusError` out, rebalances heard through :class:`Rebalance`. A group member subscribes
and commits; a reader assigns partitions and seeks, and commits nothing."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from gateway.bus.records import Fetched, Partition, Polled, Record, RecordView
from gateway.core.kafka_settings import KafkaSettings

Hook = Callable[[list[Partition]], None]
_nothing: Hook = lambda partitions: None  # noqa: E731


@dataclass(frozen=True)
class Rebalance:
    """``on_revoked`` runs before the group takes partitions away, ``on_assigned`` after it hands new ones (with a
    cooperative assignor, only those that move), ``on_lost`` (else ``on_revoked``) when the group has already taken
    them. kafka-python runs them on its IO thread, where a blocking call such as a commit raises: commit nothing."""

    on_revoked: Hook = _nothing
    on_assigned: Hook = _nothing
    on_lost: Hook | None = None

    @property
    def lost_hook(self) -> Hook:
        return self.on_lost or self.on_revoked


class Consumer(ABC):
    """Each engine also has ``assignment()``, ``paused()``, ``pause(*partitions)``, ``resume(*partitions)``,
    ``seek(partition, offset)`` and ``close(autocommit=False)``, in its client's meaning."""

    engine: str

    def __init__(self, settings: KafkaSettings, group: bool) -> None:
        self.settings, self.group = settings, group

    # -- what is read (the engine's) ---------------------------------------------------------------------------
    @abstractmethod
    def subscribe(self, topics: list[str], listener: Rebalance | None = None) -> None:
        """Join the group on ``topics``; ``listener`` hears of partitions assigned, revoked and lost."""

    @abstractmethod
    def assign(self, partitions: Iterable[Partition]) -> None:
        """Read exactly these partitions (a reader), each from its committed offset or the earliest one."""

    @abstractmethod
    def partitions(self, topic: str, timeout_ms: int | None = None) -> set[int]:
        """The topic's partitions; empty when the broker does not know the topic (yet)."""

    @property
    @abstractmethod
    def joined(self) -> bool:
        """Subscribed, and in a generation of its group: False while it joins (or after it left)."""

    # -- flow -------------------------------------------------------------------------------------------------
    def poll(self, timeout_ms: int, max_records: int | None = None) -> list[Fetched]:
        """The next records (at most ``max_records``), in offset order per partition; a record the client cannot
        decode comes as an :class:`~gateway.bus.records.UnreadableRecord`, the position already past it."""
        return self._fetch(timeout_ms, max_records or self.settings.max_poll_records)

    def poll_views(self, timeout_ms: int, max_records: int | None = None) -> Polled:
        """As :meth:`poll`, as message views (:class:`~gateway.bus.records.MessageView`): for a reader of hundreds of
        thousands of records a second (the monitor)."""
        return self._fetch_views(timeout_ms, max_records or self.settings.max_poll_records)

    @abstractmethod
    def _fetch(self, timeout_ms: int, max_records: int) -> list[Fetched]: ...

    def _fetch_views(self, timeout_ms: int, max_records: int) -> Polled:
        fetched = self._fetch(timeout_ms, max_records)
        unread = [r for r in fetched if not isinstance(r, Record)]
        return Polled([RecordView(r) for r in fetched if isinstance(r, Record)], unread)

    def stall_cause(self, since: float) -> str:
        """Why a partition unmoved since ``since`` (``time.monotonic()``) stands, as far as the client tells."""
        return ""

    def known_end(self, partition: Partition, since: float) -> int | None:
        """The partition's end as the client knows it, trusted for a partition unmoved since ``since``; None: ask."""
        return None

    # -- positions and offsets ----------------------------------------------------------------------------------
    @abstractmethod
    def position(self, partition: Partition) -> int:
        """The offset of the next record it hands out from ``partition``."""

    @abstractmethod
    def seek_to_beginning(self, *partitions: Partition) -> None:
        """Each partition (none given: every assigned one) from its first offset."""

    @abstractmethod
    def commit(self, offsets: Mapping[Partition, int]) -> None:
        """Commit, per partition, the offset of the next record to read; a partition this member no longer holds is
        left to its next owner (raises :class:`CommitFailed` when a rebalance took one first)."""

    @abstractmethod
    def watermarks(self, partitions: Iterable[Partition], timeout_ms: int | None = None) -> dict[Partition, tuple]:
        """Per partition, its first offset and the offset after its last readable record."""

    @abstractmethod
    def offsets_for_times(self, times_ms: Mapping[Partition, int]) -> dict[Partition, int | None]:
        """Per partition, the first offset whose timestamp is at or after the time; None when there is none."""

    @abstractmethod
    def group_offsets(self, partitions: list[Partition], timeout_ms: int | None = None) -> dict[Partition, int | None]:
        """What this member's group has committed per partition (None: nothing)."""

    # -- built on the above, for both engines -------------------------------------------------------------------
    def end_offsets(self, partitions: Iterable[Partition], timeout_ms: int | None = None) -> dict[Partition, int]:
        """The offset after the last readable record of each partition."""
        return {p: end for p, (_, end) in self.watermarks(partitions, timeout_ms).items()}

    def lag(self, topic: str, timeout_ms: int | None = None) -> int | None:
        """Records behind the end of ``topic`` over its assigned partitions (None: none assigned). It asks the ends
        of every partition of the topic, so it also proves that the broker answers."""
        known = sorted(self.partitions(topic, timeout_ms) or {0})
        ends = self.end_offsets([Partition(topic, p) for p in known], timeout_ms)
        assigned = [p for p in self.assignment() if p.topic == topic]
        if not assigned:
            return None
        return sum(max(0, ends[p] - self.position(p)) for p in assigned if p in ends)
