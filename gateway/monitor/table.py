"""The monitor's columnar store: one row per video (event time, first score's timestamp, canary flag, labels) and
per series numpy arrays of (video slot, score, decision), appended as score events come.

A video's slot is its row here; an expired or evicted video is only marked dead, and the arrays are compacted
(every slot renumbered) once dead rows outnumber live ones. Appends write past the last row only, and growth
and compaction replace arrays rather than change them, so a :class:`Frame` holds views of the series arrays
without copying them while the store goes on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# an array that is full grows by half ...
GROWTH = 1.5
# ... or by an eighth past a million rows (the slack a large store carries)
LARGE, LARGE_GROWTH = 1 << 20, 1.125
# rows of a new array
START = 1024
NO_LABEL = -1
# name -> (dtype, value of a new row)
VIDEO_COLUMNS = {
    "event_time": (np.float64, 0.0),
    # the Kafka timestamp of the video's first score event
    "first_seen": (np.float64, 0.0),
    "canary": (np.bool_, False),
    # 1 generated, 0 real: the score events' own label
    "row_label": (np.int8, NO_LABEL),
    # the earliest labels-topic label that joined: its timestamp
    "topic_time": (np.float64, np.nan),
    # ... and the label
    "topic_label": (np.int8, NO_LABEL),
    "alive": (np.bool_, False),
}
# set as a row is added, never after: a frame takes views of them, not copies (growth and compaction make new arrays, so
# a view keeps its values)
WRITTEN_ONCE = frozenset({"event_time", "first_seen", "canary"})


def capacity(rows: int, size: int) -> int:
    """The rows a full array of ``rows`` grows to, to hold at least ``size``: half as many again, but never past
    ``LARGE`` by more than an eighth (an array of 1.0M rows growing by half would carry 0.5M rows of slack in each
    of a large store's series)."""
    grown = int(rows * GROWTH)
    if grown > LARGE:
        grown = max(LARGE, int(rows * LARGE_GROWTH))
    return max(size, grown, START)


def _grown(a: np.ndarray, size: int, fill=0) -> np.ndarray:
    """``a`` in a new array of :func:`capacity` rows, the new rows ``fill``, each row written once (``np.full``
    then a copy wrote the old rows twice). Zeros come from ``np.zeros``: where the allocator maps the array afresh,
    the kernel's zeroed pages, touched only as rows are appended (a million-video store grows every series at
    once, under the store's lock: 134 -> 98 ms in process)."""
    rows = capacity(len(a), size)
    if fill == 0:
        out = np.zeros(rows, dtype=a.dtype)
    else:
        out = np.empty(rows, dtype=a.dtype)
        out[len(a) :] = fill
    out[: len(a)] = a
    return out


def oldest(slots: np.ndarray, times: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` first of ascending ``slots`` by (time, slot), as ``slots[np.lexsort((slots, times))[:k]]`` gives
    them (in another order) in linear time: a partition finds the k-th time, and of the slots at exactly that time
    the lowest fill up (a store over its bound evicts this way while it ingests: a sort of a million times took
    about a quarter of a second, under the lock a scrape waits on)."""
    if k >= slots.size:
        return slots
    kth = np.partition(times, k - 1)[k - 1]
    if np.isnan(kth):
        # fewer than k times are numbers: those, then the lowest NaN-timed slots
        below, tied = slots[~np.isnan(times)], slots[np.isnan(times)]
    else:
        below, tied = slots[times < kth], slots[times == kth]
    return np.concatenate([below, tied[: k - below.size]])


class Videos:
    """One row per video slot; ``ids[slot]`` its video_id, ``index`` the live ones' slots."""

    def __init__(self) -> None:
        self.n = 0
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.cols = {name: np.full(0, fill, dtype) for name, (dtype, fill) in VIDEO_COLUMNS.items()}

    @classmethod
    def of(cls, ids: list[str], cols: dict[str, np.ndarray]) -> Videos:
        """The table of a checkpoint's columns (dead slots included)."""
        out = cls()
        out.n, out.ids = len(ids), list(ids)
        out.cols = {k: np.array(cols[k], dtype=dtype) for k, (dtype, _) in VIDEO_COLUMNS.items()}
        out.index = {
            vid: slot for slot, (vid, live) in enumerate(zip(ids, out.cols["alive"].tolist(), strict=True)) if live
        }
        return out

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["cols"][name]
        except KeyError:
            raise AttributeError(name) from None

    def append_video(self, video_id: str, event_time: float, first_seen: float, canary: bool, row_label: int) -> int:
        slot = self.n
        if slot == len(self.cols["alive"]):
            self.cols = {k: _grown(a, slot + 1, VIDEO_COLUMNS[k][1]) for k, a in self.cols.items()}
        c = self.cols
        c["event_time"][slot], c["first_seen"][slot], c["canary"][slot] = event_time, first_seen, canary
        c["row_label"][slot], c["alive"][slot] = row_label, True
        self.ids.append(video_id)
        self.index[video_id] = slot
        self.n += 1
        return slot

    @property
    def held(self) -> int:
        return len(self.index)

    def kill(self, slots: np.ndarray) -> None:
        self.cols["alive"][slots] = False
        for slot in slots.tolist():
            del self.index[self.ids[slot]]

    def compact(self) -> np.ndarray:
        """Drop dead rows; returns the new slot of every old one (-1: dropped)."""
        keep = self.cols["alive"][: self.n]
        new = np.cumsum(keep) - 1
        new[~keep] = -1
        self.cols = {k: a[: self.n][keep].copy() for k, a in self.cols.items()}
        self.ids = [vid for vid, k in zip(self.ids, keep.tolist(), strict=True) if k]
        self.index = {vid: slot for slot, vid in enumerate(self.ids)}
        self.n = len(self.ids)
        return new


class Rows:
    """One series' score events: (video slot, score, decision), in arrival order; ``has[slot]`` once scored."""

    def __init__(self) -> None:
        self.n = 0
        self.slot = np.zeros(0, np.int32)
        self.score = np.zeros(0, np.float64)
        self.decision = np.zeros(0, np.bool_)
        self.has = np.zeros(0, np.bool_)

    @classmethod
    def of(cls, slot: np.ndarray, score: np.ndarray, decision: np.ndarray, slots: int) -> Rows:
        out = cls()
        # not copied: rows are
        out.slot, out.score = np.asarray(slot, np.int32), np.asarray(score, np.float64)
        # only ever appended past n, by growing
        out.decision, out.n = np.asarray(decision, np.bool_), len(out.slot)
        out.has = np.zeros(slots, np.bool_)
        out.has[out.slot] = True
        return out

    def scored(self, slot: int) -> bool:
        return slot < len(self.has) and bool(self.has[slot])

    def append_score(self, slot: int, score: float, decision: bool) -> None:
        i = self.n
        if i == len(self.slot):
            self.slot, self.score = _grown(self.slot, i + 1), _grown(self.score, i + 1)
            self.decision = _grown(self.decision, i + 1)
        if slot >= len(self.has):
            self.has = _grown(self.has, slot + 1)
        self.slot[i], self.score[i], self.decision[i], self.has[slot] = slot, score, decision, True
        self.n += 1

    def extend(self, slots: list[int], scores: list[float], decisions: list[bool | None]) -> int:
        """:meth:`add` for each (slot, score, decision) in turn but a slot scored already, earlier in the batch or
        before it (a decision None is False); returns how many were added."""
        if len(slots) == 1:
            # one event (Store.add_score): no arrays to build
            if self.scored(slots[0]):
                return 0
            self.append_score(slots[0], float(scores[0]), bool(decisions[0]))
            return 1
        s = np.array(slots, np.int64)
        if s.size and (top := int(s.max())) >= len(self.has):
            self.has = _grown(self.has, top + 1)
        first = np.zeros(s.size, np.bool_)
        first[np.unique(s, return_index=True)[1]] = True
        keep = np.flatnonzero(first & ~self.has[s])
        i, k = self.n, keep.size
        if i + k > len(self.slot):
            self.slot, self.score = _grown(self.slot, i + k), _grown(self.score, i + k)
            self.decision = _grown(self.decision, i + k)
        self.slot[i : i + k], self.has[s[keep]] = s[keep], True
        self.score[i : i + k] = np.array(scores, np.float64)[keep]
        self.decision[i : i + k] = np.array(decisions, np.bool_)[keep]
        self.n += k
        return k

    def compact(self, new_slot: np.ndarray) -> None:
        slot = new_slot[self.slot[: self.n]]
        keep = slot >= 0
        self.slot, self.score = slot[keep].astype(np.int32), self.score[: self.n][keep].copy()
        self.decision, self.n = self.decision[: self.n][keep].copy(), int(keep.sum())
        self.has = np.zeros(len(new_slot), np.bool_)
        self.has[self.slot] = True


@dataclass(frozen=True)
class Frame:
    """What one computation reads: copies of the per-video columns that change, views of the rest and of each
    series' rows."""

    ids: list[str]
    videos: dict[str, np.ndarray]
    # series -> (slot, score, decision)
    rows: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray, np.ndarray]]

    def order(self) -> np.ndarray:
        """Per slot, its position among the live videos by (event time, video_id); -1 for a dead slot."""
        live = np.flatnonzero(self.videos["alive"])
        t = self.videos["event_time"][live]
        by_time = live[np.argsort(t, kind="stable")]
        ts = self.videos["event_time"][by_time]
        bounds = np.concatenate([[0], np.flatnonzero(np.diff(ts)) + 1, [ts.size]])
        for i in np.flatnonzero(np.diff(bounds) > 1).tolist():
            # equal event times (rare): by video_id
            a, b = bounds[i], bounds[i + 1]
            by_time[a:b] = sorted(by_time[a:b].tolist(), key=self.ids.__getitem__)
        rank = np.full(len(self.videos["alive"]), -1, np.int64)
        rank[by_time] = np.arange(by_time.size)
        return rank

    def labels(self) -> np.ndarray:
        """Per slot: 1 generated, 0 real, -1 not known (the score events' label first)."""
        row, topic = self.videos["row_label"], self.videos["topic_label"]
        return np.where(row >= 0, row, topic)
