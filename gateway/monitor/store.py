"""What the monitor holds: every scored video of its longest window, by event time, with its label once known,
in columns (:mod:`gateway.monitor.table`).

Exact by construction: a video stays while its event time (the input message's Kafka timestamp) is within
``windows.seconds`` of now, whatever order its scores and label arrived in; a score event is kept once per
idempotency key (a redelivery never counts twice). Labels run on event time too: a label joins its video when it
came at most ``label_ttl_s`` before the video's first score event, both by their Kafka timestamps, and when a
video has several the earliest such label holds. So the order in which a rebuild reads the two topics changes
nothing. A label whose video is not held yet waits until the score topic's watermark (given by the reader: no
score event can still come with an earlier timestamp) has passed its timestamp plus the TTL. Both bounds
(``max_videos``, ``max_waiting_labels``) evict the oldest (the videos' at the next :meth:`Store.expire`, by
event time, so whatever order they came in) and count them.
"""

from __future__ import annotations

import bisect
import contextlib
import heapq
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from detectors.thresholds import CARD_THRESHOLD
from gateway.core.messages import ScoreRow
from gateway.monitor.config import WindowSettings
from gateway.monitor.table import NO_LABEL, WRITTEN_ONCE, Frame, Rows, Videos, oldest

# detector, version, condition
Series = tuple[str, str, str]
LABELS = ("real", "generated")
CODE = {"real": 0, "generated": 1}
# the label event's Kafka timestamp, the label
TimedLabel = tuple[float, str]


@dataclass
class Video:
    """One held video as plain values (tests and the from-scratch reference computation)."""

    event_time: float
    canary: bool
    label: str | None
    # series -> (score, decision)
    scores: dict[Series, tuple[float, bool]] = field(default_factory=dict)


@dataclass(frozen=True)
class Tally:
    """What a store has counted, as of the end of its latest change (a scrape reads it without the lock, so it
    never waits for an ingest step: growing every series' arrays at a million videos held the lock 0.1-0.2 s, and
    up to 0.9 s beside a scraping thread)."""

    # score events by outcome, and videos dropped
    events: Mapping[str, int]
    # label events by outcome
    labels: Mapping[str, int]
    # videos held
    held: int
    # labels waiting for their video
    waiting: int


class Store:
    """Scored videos and waiting labels; thread-safe (the consumer adds, the computation reads a :class:`Frame`).

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
        self.table = Videos()
        self.series: dict[Series, Rows] = {}
        # video_id -> its labels, earliest first
        self.waiting: dict[str, list[TimedLabel]] = {}
        self.waiting_count = 0
        self._label_heap: list[tuple[float, str]] = []
        # score events by outcome
        self.events: Counter[str] = Counter()
        # label events by outcome
        self.labels: Counter[str] = Counter()
        self.lock = threading.Lock()
        self.tally = Tally({}, {}, 0, 0)

    @property
    def held(self) -> int:
        return self.table.held

    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """Hold the lock for a change, and publish the :class:`Tally` it leaves (also when it raised part way)."""
        with self.lock:
            try:
                yield
            finally:
                self.tally = Tally(dict(self.events), dict(self.labels), self.table.held, self.waiting_count)

    # -- score events ----------------------------------------------------------------------------------------
    def add_score(self, row: ScoreRow, record_time: float) -> str:
        """Keep one score event (``record_time``: its Kafka timestamp); returns its outcome: added, duplicate,
        expired or error_row."""
        (outcome,) = self.add_scores([(vars(row), record_time)])
        return outcome

    def add_scores(self, events: Iterable[tuple[Mapping[str, Any], float]]) -> Counter[str]:
        """Keep score events in turn, each as :meth:`add_score` would (an event: its fields by name, as a
        :class:`ScoreRow` holds them, and its Kafka timestamp), under one hold of the lock; returns how many had
        each outcome."""
        with self._changing():
            counts = self._add_scores(events)
            self.events.update(counts)
            return counts

    def _add_scores(self, events: Iterable[tuple[Mapping[str, Any], float]]) -> Counter[str]:
        """Each event's video is found or added in turn; the series' rows are appended together at the end (so
        one hot loop, no numpy call per event)."""
        counts: Counter[str] = Counter()
        pending: dict[Series, tuple[list[int], list[float], list[bool | None]]] = {}
        table, clock, seconds = self.table, self.clock, self.settings.seconds
        index, row_label = table.index, table.cols["row_label"]
        for fields, record_time in events:
            if fields["error"] is not None or fields["score"] is None:
                # failures are the gateway's operational metrics, not a sample
                counts["error_row"] += 1
                continue
            t = fields["event_time"]
            if t is None:
                t = record_time
            if t < clock() - seconds:
                counts["expired"] += 1
                continue
            label, slot = fields["label"], index.get(fields["video_id"])
            if slot is None:
                slot = self._new_video(fields["video_id"], t, record_time, fields["canary"], label)
                # a new row may have grown the columns
                row_label = table.cols["row_label"]
            elif label in LABELS and row_label[slot] == NO_LABEL:
                row_label[slot] = CODE[label]
            # the version it counts under, with a recalibrated threshold's id (messages.series_version's rule, inline:
            # this loop runs per event)
            version, tid = fields["detector_version"], fields["threshold_id"]
            if tid is not None and tid != CARD_THRESHOLD:
                version = f"{version}+{tid}"
            key = (fields["detector"], version, fields["condition"])
            if (batch := pending.get(key)) is None:
                batch = pending[key] = ([], [], [])
            batch[0].append(slot)
            batch[1].append(fields["score"])
            batch[2].append(fields["decision"])
        for key, (slots, scores, decisions) in pending.items():
            added = self._rows(key).extend(slots, scores, decisions)
            counts.update({outcome: n for outcome, n in (("added", added), ("duplicate", len(slots) - added)) if n})
        return counts

    def _rows(self, key: Series) -> Rows:
        rows = self.series.get(key)
        if rows is None:
            rows = self.series[key] = Rows()
        return rows

    def _new_video(self, video_id: str, t: float, first_seen: float, canary: bool, label: str | None) -> int:
        slot = self.table.append_video(video_id, t, first_seen, canary, CODE.get(label, NO_LABEL))
        for timed in self.waiting.pop(video_id, []):
            self.waiting_count -= 1
            self.labels[self._join(slot, timed)] += 1
        return slot

    # -- labels ----------------------------------------------------------------------------------------------
    def add_label(self, video_id: str, label: str, t: float) -> str:
        """Join a label (``t``: its Kafka timestamp) to its video, or keep it until the video's scores come;
        returns the outcome: joined, duplicate, conflict (another label holds), waiting or expired."""
        with self._changing():
            outcome = self._add_label(video_id, label, t)
            self.labels[outcome] += 1
            return outcome

    def _join(self, slot: int, timed: TimedLabel) -> str:
        """A label for a held video: it holds if it came within the TTL before the video's first score event and
        before any other that did (so the outcome of a set of labels does not depend on their reading order)."""
        v = self.table
        if timed[0] + self.settings.label_ttl_s < v.first_seen[slot]:
            return "expired"
        code = CODE[timed[1]]
        if v.topic_label[slot] == NO_LABEL:
            v.topic_time[slot], v.topic_label[slot] = timed[0], code
            return "joined"
        held = (float(v.topic_time[slot]), int(v.topic_label[slot]))
        if (timed[0], code) < held:
            v.topic_time[slot], v.topic_label[slot] = timed[0], code
        return "duplicate" if held[1] == code else "conflict"

    def _add_label(self, video_id: str, label: str, t: float) -> str:
        slot = self.table.index.get(video_id)
        if slot is not None:
            return self._join(slot, (t, label))
        if t + self.settings.label_ttl_s < self.watermark():
            # every score event it could have joined has been read
            return "expired"
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
        """Drop videos older than the time window, then the oldest past ``max_videos``, and waiting labels older
        than the TTL before the watermark."""
        with self._changing():
            self._expire()

    def _expire(self) -> None:
        v, now, mark = self.table, self.clock(), self.watermark()
        alive, t = v.alive[: v.n], v.event_time[: v.n]
        self._kill(np.flatnonzero(alive & (t < now - self.settings.seconds)), "expired")
        over = v.held - self.settings.max_videos
        if over > 0:
            live = np.flatnonzero(v.alive[: v.n])
            self._kill(oldest(live, v.event_time[live], over), "evicted")
        while self._label_heap and self._label_heap[0][0] + self.settings.label_ttl_s < mark:
            self._pop_label("expired")
        if v.n - v.held > v.held:
            # dead rows outnumber live ones: renumber (amortised: at most once per doubling)
            new_slot = v.compact()
            for rows in self.series.values():
                rows.compact(new_slot)

    def _kill(self, slots: np.ndarray, outcome: str) -> None:
        if slots.size:
            self.table.kill(slots)
            self.events[f"video_{outcome}"] += int(slots.size)

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

    # -- what a computation reads ----------------------------------------------------------------------------------
    def frame(self) -> Frame:
        """The time window now, for a computation off the lock: copies of the per-video columns that change
        (labels, liveness), views of the rest and of the series' rows (appends go past them; compaction and
        growth make new arrays)."""
        with self._changing():
            self._expire()
            return self._frame()

    def _frame(self) -> Frame:
        v = self.table
        videos = {k: a[: v.n] if k in WRITTEN_ONCE else a[: v.n].copy() for k, a in v.cols.items()}
        rows = {k: (r.slot[: r.n], r.score[: r.n], r.decision[: r.n]) for k, r in self.series.items()}
        return Frame(v.ids[: v.n], videos, rows)

    @property
    def videos(self) -> dict[str, Video]:
        """The held videos as plain values (for tests and the from-scratch reference; not on a hot path)."""
        return dict(self.snapshot())

    def snapshot(self) -> list[tuple[str, Video]]:
        """The videos of the time window, oldest first (ties by video_id), as plain values."""
        f = self.frame()
        labels, out = f.labels(), {}
        for slot in np.flatnonzero(f.videos["alive"]).tolist():
            label = None if labels[slot] < 0 else LABELS[labels[slot]]
            out[slot] = (f.ids[slot], Video(float(f.videos["event_time"][slot]), bool(f.videos["canary"][slot]), label))
        for series, (slot, score, decision) in f.rows.items():
            for s, x, d in zip(slot.tolist(), score.tolist(), decision.tolist(), strict=True):
                if s in out:
                    out[s][1].scores[series] = (x, d)
        return sorted(out.values(), key=lambda kv: (kv[1].event_time, kv[0]))

    # -- checkpoints -----------------------------------------------------------------------------------------
    def saved(self) -> tuple[Frame, dict[str, list[TimedLabel]], dict[str, dict[str, int]]]:
        """What a checkpoint writes: a frame (dead rows included), the waiting labels and the counters; evicted
        first, as a computation's frame is."""
        with self._changing():
            self._expire()
            counters = {"events": dict(self.events), "labels": dict(self.labels)}
            return self._frame(), {vid: list(ls) for vid, ls in self.waiting.items()}, counters

    def restore(self, frame: Frame, waiting: dict[str, list[TimedLabel]], counters: dict[str, dict[str, int]]):
        """Hold what a checkpoint held (a fresh store only)."""
        with self._changing():
            self.table = Videos.of(frame.ids, frame.videos)
            for series, (slot, score, decision) in frame.rows.items():
                self.series[series] = Rows.of(slot, score, decision, self.table.n)
            for vid, labels in waiting.items():
                for t, label in labels:
                    self.waiting.setdefault(vid, []).append((t, label))
                    heapq.heappush(self._label_heap, (t, vid))
                    self.waiting_count += 1
            self.events.update(counters["events"])
            self.labels.update(counters["labels"])
            self._expire()
