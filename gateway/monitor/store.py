"""What the monitor holds: every scored video of its longest window, by event time, with its label once known.

Exact by construction: a video stays while its event time (the input message's Kafka timestamp) is within
``windows.seconds`` of now, whatever order its scores and label arrived in; a score event is kept once per
idempotency key (a redelivery never counts twice). Labels run on event time too: a label joins its video when it
came at most ``label_ttl_s`` before the video's first score event, both by their Kafka timestamps, and when a
video has several the earliest such label holds. So the order in which a rebuild reads the two topics changes
nothing. A label whose video is not held yet waits until the score topic's watermark (given by the reader: no
score event can still come with an earlier timestamp) has passed its timestamp plus the TTL. Both bounds
(``max_videos``, ``max_waiting_labels``) evict the oldest and count it.
"""

from __future__ import annotations

import bisect
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
TimedLabel = tuple[float, str]  # (the label event's Kafka timestamp, the label)


@dataclass
class Video:
    event_time: float
    canary: bool
    row_label: str | None  # carried by its score events (the input message's)
    first_seen: float = 0.0  # the Kafka timestamp of its first score event
    topic_label: TimedLabel | None = None  # the earliest label of the labels topic that joined it
    scores: dict[Series, tuple[float, bool]] = field(default_factory=dict)  # series -> (score, decision)

    @property
    def label(self) -> str | None:
        """The score events' label if they carry one, else the labels topic's."""
        return self.row_label or (self.topic_label[1] if self.topic_label else None)


class Store:
    """Scored videos and waiting labels; thread-safe (the consumer adds, the scrape reads).

    ``watermark()``: a time such that no score event with an earlier Kafka timestamp can still be read (the
    monitor's reader knows it from its positions; by default the clock)."""

    def __init__(
        self,
        settings: WindowSettings,
        clock: Callable[[], float] = time.time,
        watermark: Callable[[], float] | None = None,
    ) -> None:
        self.settings, self.clock = settings, clock
        self.watermark = watermark or clock
        self.videos: dict[str, Video] = {}
        self.waiting: dict[str, list[TimedLabel]] = {}  # video_id -> its labels, earliest first
        self.waiting_count = 0
        self._video_heap: list[tuple[float, str]] = []
        self._label_heap: list[tuple[float, str]] = []
        self.events: Counter[str] = Counter()  # score events by outcome
        self.labels: Counter[str] = Counter()  # label events by outcome
        self.lock = threading.Lock()

    # -- score events ----------------------------------------------------------------------------------------
    def add_score(self, row: ScoreRow, record_time: float) -> str:
        """Keep one score event (``record_time``: its Kafka timestamp); returns its outcome: added, duplicate,
        expired or error_row."""
        with self.lock:
            outcome = self._add_score(row, record_time)
            self.events[outcome] += 1
            return outcome

    def _add_score(self, row: ScoreRow, record_time: float) -> str:
        if row.error is not None or row.score is None:
            return "error_row"  # failures are the gateway's operational metrics, not a sample
        t = row.event_time if row.event_time is not None else record_time
        if t < self.clock() - self.settings.seconds:
            return "expired"
        video = self.videos.get(row.video_id)
        if video is None:
            video = self._new_video(row, t, record_time)
        elif video.row_label is None and row.label in LABELS:
            video.row_label = row.label
        key = (row.detector, row.detector_version, row.condition)
        if key in video.scores:
            return "duplicate"
        video.scores[key] = (float(row.score), bool(row.decision))
        return "added"

    def _new_video(self, row: ScoreRow, t: float, first_seen: float) -> Video:
        video = Video(t, row.canary, row.label if row.label in LABELS else None, first_seen)
        for timed in self.waiting.pop(row.video_id, []):
            self.waiting_count -= 1
            self.labels[self._join(video, timed)] += 1
        self.videos[row.video_id] = video
        heapq.heappush(self._video_heap, (t, row.video_id))
        while len(self.videos) > self.settings.max_videos:
            self._pop_video("evicted")
        return video

    # -- labels ----------------------------------------------------------------------------------------------
    def add_label(self, video_id: str, label: str, t: float) -> str:
        """Join a label (``t``: its Kafka timestamp) to its video, or keep it until the video's scores come;
        returns the outcome: joined, duplicate, conflict (another label holds), waiting or expired."""
        with self.lock:
            outcome = self._add_label(video_id, label, t)
            self.labels[outcome] += 1
            return outcome

    def _join(self, video: Video, timed: TimedLabel) -> str:
        """A label for a held video: it holds if it came within the TTL before the video's first score event and
        before any other that did (so the outcome of a set of labels does not depend on their reading order)."""
        if timed[0] + self.settings.label_ttl_s < video.first_seen:
            return "expired"
        held, video.topic_label = video.topic_label, min(timed, video.topic_label or timed)
        if held is None:
            return "joined"
        return "duplicate" if held[1] == timed[1] else "conflict"

    def _add_label(self, video_id: str, label: str, t: float) -> str:
        video = self.videos.get(video_id)
        if video is not None:
            return self._join(video, (t, label))
        if t + self.settings.label_ttl_s < self.watermark():
            return "expired"  # every score event it could have joined has been read
        labels = self.waiting.setdefault(video_id, [])
        if (t, label) in labels:
            return "duplicate"
        bisect.insort(labels, (t, label))
        self.waiting_count += 1
        heapq.heappush(self._label_heap, (t, video_id))
        while self.waiting_count > self.settings.max_waiting_labels:
            self._pop_label("evicted")
        return "waiting"

    # -- expiry ----------------------------------------------------------------------------------------------
    def expire(self) -> None:
        """Drop videos older than the time window, and waiting labels older than the TTL before the watermark."""
        with self.lock:
            now, mark = self.clock(), self.watermark()
            while self._video_heap and self._video_heap[0][0] < now - self.settings.seconds:
                self._pop_video("expired")
            while self._label_heap and self._label_heap[0][0] + self.settings.label_ttl_s < mark:
                self._pop_label("expired")

    def _pop_video(self, outcome: str) -> None:
        t, vid = heapq.heappop(self._video_heap)
        video = self.videos.get(vid)
        if video is not None and video.event_time == t:
            del self.videos[vid]
            self.events[f"video_{outcome}"] += 1

    def _pop_label(self, outcome: str) -> None:
        t, vid = heapq.heappop(self._label_heap)
        labels = self.waiting.get(vid, [])
        kept = [timed for timed in labels if timed[0] != t]
        if len(kept) < len(labels):
            self.waiting_count -= len(labels) - len(kept)
            self.labels[outcome] += len(labels) - len(kept)
            if kept:
                self.waiting[vid] = kept
            else:
                del self.waiting[vid]

    def snapshot(self) -> list[tuple[str, Video]]:
        """The videos of the time window, oldest first (ties by video_id), each a copy."""
        self.expire()
        with self.lock:
            items = [
                (vid, Video(v.event_time, v.canary, v.row_label, v.first_seen, v.topic_label, dict(v.scores)))
                for vid, v in self.videos.items()
            ]
        items.sort(key=lambda kv: (kv[1].event_time, kv[0]))
        return items
