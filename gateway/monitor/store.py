"""What the monitor holds: every scored video of its longest window, by event time, with its label once known.

Exact by construction: a video stays while its event time (the input message's Kafka timestamp) is within
``windows.seconds`` of now, whatever order its scores and label arrived in; a score event is kept once per
idempotency key (a redelivery never counts twice); a label that comes before its video's scores waits for
them up to ``label_ttl_s``. Both bounds (``max_videos``, ``max_waiting_labels``) evict the oldest and count it.
"""

from __future__ import annotations

import heapq
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from gateway.core.messages import ScoreRow
from gateway.monitor.config import WindowSettings

Series = tuple[str, str, str]  # (detector, version, condition)
LABELS = ("real", "generated")


@dataclass
class Video:
    event_time: float
    canary: bool
    label: str | None
    scores: dict[Series, tuple[float, bool]] = field(default_factory=dict)  # series -> (score, decision)


class Store:
    """Scored videos and waiting labels; thread-safe (the consumer adds, the scrape reads)."""

    def __init__(self, settings: WindowSettings, clock: Callable[[], float] = time.time) -> None:
        self.settings, self.clock = settings, clock
        self.videos: dict[str, Video] = {}
        self.waiting: dict[str, tuple[str, float]] = {}  # video_id -> (label, label's event time)
        self._video_heap: list[tuple[float, str]] = []
        self._label_heap: list[tuple[float, str]] = []
        self.events: Counter[str] = Counter()  # score events by outcome
        self.labels: Counter[str] = Counter()  # label events by outcome
        self.lock = threading.Lock()

    # -- score events ----------------------------------------------------------------------------------------
    def add_score(self, row: ScoreRow, fallback_time: float) -> str:
        """Keep one score event; returns its outcome: added, duplicate, expired or error_row."""
        with self.lock:
            outcome = self._add_score(row, fallback_time)
            self.events[outcome] += 1
            return outcome

    def _add_score(self, row: ScoreRow, fallback_time: float) -> str:
        if row.error is not None or row.score is None:
            return "error_row"  # failures are the gateway's operational metrics, not a sample
        t = row.event_time if row.event_time is not None else fallback_time
        if t < self.clock() - self.settings.seconds:
            return "expired"
        video = self.videos.get(row.video_id)
        if video is None:
            video = self._new_video(row, t)
        elif video.label is None and row.label in LABELS:
            video.label = row.label
        key = (row.detector, row.detector_version, row.condition)
        if key in video.scores:
            return "duplicate"
        video.scores[key] = (float(row.score), bool(row.decision))
        return "added"

    def _new_video(self, row: ScoreRow, t: float) -> Video:
        label = row.label if row.label in LABELS else None
        waiting = self.waiting.pop(row.video_id, None)
        if waiting is not None:
            self.labels["joined"] += 1
            label = label or waiting[0]
        video = self.videos[row.video_id] = Video(t, row.canary, label)
        heapq.heappush(self._video_heap, (t, row.video_id))
        while len(self.videos) > self.settings.max_videos:
            self._pop_video("evicted")
        return video

    # -- labels ----------------------------------------------------------------------------------------------
    def add_label(self, video_id: str, label: str, t: float) -> str:
        """Join a label to its video now, or keep it until the video's scores come; returns the outcome."""
        with self.lock:
            outcome = self._add_label(video_id, label, t)
            self.labels[outcome] += 1
            return outcome

    def _add_label(self, video_id: str, label: str, t: float) -> str:
        video = self.videos.get(video_id)
        if video is not None:
            if video.label is None:
                video.label = label
                return "joined"
            return "duplicate" if video.label == label else "conflict"  # the first label stays
        if t < self.clock() - self.settings.label_ttl_s:
            return "expired"
        if video_id in self.waiting:  # the first label stays, and its TTL
            return "duplicate" if self.waiting[video_id][0] == label else "conflict"
        heapq.heappush(self._label_heap, (t, video_id))
        self.waiting[video_id] = (label, t)
        while len(self.waiting) > self.settings.max_waiting_labels:
            self._pop_label("evicted")
        return "waiting"

    # -- expiry ----------------------------------------------------------------------------------------------
    def expire(self) -> None:
        """Drop videos older than the time window and labels that waited past their TTL."""
        with self.lock:
            now = self.clock()
            while self._video_heap and self._video_heap[0][0] < now - self.settings.seconds:
                self._pop_video("expired")
            while self._label_heap and self._label_heap[0][0] < now - self.settings.label_ttl_s:
                self._pop_label("expired")

    def _pop_video(self, outcome: str) -> None:
        t, vid = heapq.heappop(self._video_heap)
        video = self.videos.get(vid)
        if video is not None and video.event_time == t:
            del self.videos[vid]
            self.events[f"video_{outcome}"] += 1

    def _pop_label(self, outcome: str) -> None:
        t, vid = heapq.heappop(self._label_heap)
        hit = self.waiting.get(vid)
        if hit is not None and hit[1] == t:
            del self.waiting[vid]
            self.labels[outcome] += 1

    def snapshot(self) -> list[tuple[str, Video]]:
        """The videos of the time window, oldest first (ties by video_id), each a copy."""
        self.expire()
        with self.lock:
            items = [(vid, Video(v.event_time, v.canary, v.label, dict(v.scores))) for vid, v in self.videos.items()]
        items.sort(key=lambda kv: (kv[1].event_time, kv[0]))
        return items
