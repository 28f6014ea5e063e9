"""Labelled scores kept for the windowed metrics: a count window and a time window per (detector, version,
condition), and the join of scores with their delayed labels (bounded, with a TTL)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass

from gateway.core.config import WindowSettings


@dataclass(frozen=True)
class Entry:
    t: float
    video_id: str
    label: str
    score: float
    decision: bool


class Windows:
    """Labelled scores per (detector, version, condition): a count window and a time window; thread-safe."""

    def __init__(self, settings: WindowSettings, clock: Callable[[], float] = time.time) -> None:
        self.settings, self.clock = settings, clock
        self.count: dict[tuple, deque[Entry]] = {}
        self.time: dict[tuple, deque[Entry]] = {}
        self.lock = threading.Lock()

    def add(self, key: tuple, entry: Entry) -> None:
        with self.lock:
            self.count.setdefault(key, deque(maxlen=self.settings.count)).append(entry)
            window = self.time.setdefault(key, deque(maxlen=max(self.settings.count * 50, 10_000)))
            window.append(entry)

    def snapshot(self) -> dict[str, dict[tuple, list[Entry]]]:
        horizon = self.clock() - self.settings.seconds
        with self.lock:
            for q in self.time.values():
                while q and q[0].t < horizon:
                    q.popleft()
            return {
                "count": {k: list(v) for k, v in self.count.items()},
                "time": {k: list(v) for k, v in self.time.items()},
            }


class LabelJoin:
    """Delayed ground truth: labels by video_id, and scores waiting for theirs; both bounded and TTL'd."""

    def __init__(self, settings: WindowSettings, clock: Callable[[], float] = time.time) -> None:
        self.settings, self.clock = settings, clock
        self.labels: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self.pending: OrderedDict[str, list[tuple[tuple, Entry]]] = OrderedDict()
        self.pending_size = 0
        self.expired = 0

    def label_of(self, video_id: str) -> str | None:
        self._expire()
        hit = self.labels.get(video_id)
        return hit[0] if hit else None

    def add_label(self, video_id: str, label: str) -> list[tuple[tuple, Entry]]:
        """Store a label; return the pending scores it resolves."""
        self._expire()
        self.labels[video_id] = (label, self.clock())
        self.labels.move_to_end(video_id)
        while len(self.labels) > self.settings.max_pending:
            self.labels.popitem(last=False)
        waiting = self.pending.pop(video_id, [])
        self.pending_size -= len(waiting)
        return [(k, Entry(e.t, e.video_id, label, e.score, e.decision)) for k, e in waiting]

    def wait(self, key: tuple, entry: Entry) -> None:
        self._expire()
        self.pending.setdefault(entry.video_id, []).append((key, entry))
        self.pending_size += 1
        while self.pending_size > self.settings.max_pending and self.pending:
            _, dropped = self.pending.popitem(last=False)
            self.pending_size -= len(dropped)
            self.expired += len(dropped)

    def _expire(self) -> None:
        horizon = self.clock() - self.settings.label_ttl_s
        while self.labels and next(iter(self.labels.values()))[1] < horizon:
            self.labels.popitem(last=False)
        while self.pending:
            _vid, entries = next(iter(self.pending.items()))
            if entries[0][1].t >= horizon:
                break
            self.pending.popitem(last=False)
            self.pending_size -= len(entries)
            self.expired += len(entries)
