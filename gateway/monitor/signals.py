"""The monitor's series, computed from a snapshot of the store: labelled metrics with intervals, paired drift
vs ``original`` on the same videos, and label-free paired signals.

Populations: ``traffic`` (every scored video that is not a canary) and ``canary`` for the label-free signals;
``labelled`` (traffic with a known label) and ``canary`` for the labelled metrics. Windows: ``time`` (every
video of the last ``windows.seconds``, by event time) and ``count`` (the latest ``windows.count`` videos of
the series, labelled ones for the labelled metrics). Drift and the label-free signals pair each video's score
under a condition with its score under ``original`` by the same detector version; a series whose latest
sample is older than ``stale_after_s`` is not exported at all. The families are the catalogue's
(:mod:`gateway.core.catalogue`, exporter ``windows``); FakeR, RealR and BAcc come from
:class:`detectors.stats.metrics.Confusion`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from detectors.stats import intervals, metrics
from detectors.stats.ranks import Components, Ranked, every, is_everything, structural_components
from gateway.core import catalogue as mc
from gateway.core.catalogue import Family
from gateway.monitor.config import WindowSettings
from gateway.monitor.store import Series
from gateway.monitor.table import Frame

# the families computed here, by name
FAMILIES = {f.name: f for f in mc.families(mc.Exporter.WINDOWS)}


@dataclass(frozen=True)
class Sample:
    family: Family
    labels: dict[str, str]
    value: float

    @property
    def name(self) -> str:
        return self.family.name


@dataclass
class Column:
    """One series' samples in one population, oldest first: video index, event time, score, decision, label."""

    vid: np.ndarray
    t: np.ndarray
    score: np.ndarray
    decision: np.ndarray
    # 1 generated, 0 real, -1 not known
    label: np.ndarray
    _where: np.ndarray | None = field(default=None, repr=False)
    _ranked: Ranked | None = field(default=None, repr=False)
    _components: dict[bytes, Components] = field(default_factory=dict, repr=False)

    def where(self) -> np.ndarray:
        """Per video index, its position here (-1: not scored here)."""
        if self._where is None:
            self._where = np.full(int(self.vid.max()) + 1, -1, np.int64)
            self._where[self.vid] = np.arange(self.vid.size)
        return self._where

    def ascending(self, positions: np.ndarray) -> np.ndarray:
        """The scores at ``positions``, ascending (the column's scores are sorted once)."""
        return self._ranked_scores().take(positions).ascending()

    def components(self, positions: np.ndarray) -> Components:
        """DeLong's structural components of the scores at ``positions`` (labelled ones), computed once per set
        of positions: a series' AUC and its drift, and original's part in each condition's drift, share them."""
        positions = np.asarray(positions, np.int64)
        every = is_everything(positions, self.score.size)
        key = b"" if every else hashlib.blake2b(np.ascontiguousarray(positions).data, digest_size=16).digest()
        if key not in self._components:
            ranked = self._ranked_scores().take(positions)
            self._components[key] = structural_components((self.label if every else self.label[positions]) == 1, ranked)
        return self._components[key]

    def _ranked_scores(self) -> Ranked:
        if self._ranked is None:
            self._ranked = Ranked.of(self.score)
        return self._ranked


@dataclass(frozen=True)
class _Videos:
    """The videos of a series' rows: ``rows`` puts the rows in rank order (None: they are), and per population
    (traffic, canary) the rows' selection (None: all), the videos' indices, event times and labels."""

    rows: np.ndarray | None
    parts: dict[str, tuple[np.ndarray | None, np.ndarray, np.ndarray, np.ndarray]]


class FrameColumns:
    """The columns of a :class:`~gateway.monitor.table.Frame`, built one series at a time (a computation holds
    one series and the ``original`` ones), equal to :func:`columns` of the same videos: a video's index is its
    position among the frame's live videos by (event time, video_id)."""

    def __init__(self, frame: Frame) -> None:
        self.frame, self.rank, self.y = frame, frame.order(), frame.labels()
        self._originals: dict[Series, dict[str, Column]] = {}
        # series usually hold the same videos: shared
        self._last: tuple[np.ndarray, _Videos] | None = None

    def _build(self, series: Series) -> dict[str, Column]:
        if series in self._originals:
            return self._originals[series]
        slot, score, decision = self.frame.rows[series]
        videos = self._videos(slot)
        if videos.rows is not None:
            score, decision = score[videos.rows], decision[videos.rows]
        out = {}
        for kind, (sel, vid, t, label) in videos.parts.items():
            sc, d = (score, decision) if sel is None else (score[sel], decision[sel])
            out[kind] = Column(vid, t, sc, d, label)
        if series[2] == "original":
            self._originals[series] = out
        return out

    def _videos(self, slot: np.ndarray) -> _Videos:
        """The videos of a series' rows (``slot``), the same object for the next series with the same rows."""
        if self._last is not None and np.array_equal(self._last[0], slot):
            return self._last[1]
        raw, rows = slot, self._rows_by_rank(self.rank[slot])
        if rows is not None:
            slot = slot[rows]
        r, canary, parts = self.rank[slot], self.frame.videos["canary"][slot], {}
        # None: all
        populations = {"traffic": ~canary, "canary": canary} if canary.any() else {"traffic": None}
        for kind, sel in populations.items():
            s = slot if sel is None else slot[sel]
            if s.size:
                vid = r if sel is None else r[sel]
                parts[kind] = (sel, vid, self.frame.videos["event_time"][s], self.y[s].astype(np.int8))
        videos = _Videos(rows, parts)
        self._last = (raw, videos)
        return videos

    @staticmethod
    def _rows_by_rank(r: np.ndarray) -> np.ndarray | None:
        """The series' rows of live videos in rank order; None when they are all live and in that order already
        (scores read in event-time order)."""
        if r.size and r[0] >= 0 and bool(np.all(r[1:] > r[:-1])):
            return None
        by_rank = np.full(int(r.max(initial=-1)) + 1, -1, np.int64)
        by_rank[r[r >= 0]] = np.flatnonzero(r >= 0)
        return by_rank[by_rank >= 0]

    def items(self) -> Iterator[tuple[tuple[Series, str], Column]]:
        """Series by detector version, ``original`` first: only the current version's originals are held."""
        version = None
        for series in sorted(self.frame.rows, key=lambda s: (s[0], s[1], s[2] != "original", s[2])):
            if series[:2] != version:
                version, self._originals = series[:2], {}
            for kind, col in self._build(series).items():
                yield (series, kind), col

    def get(self, key: tuple[Series, str]) -> Column | None:
        series, kind = key
        return self._build(series).get(kind) if series in self.frame.rows else None


def compute(frame: Frame, settings: WindowSettings, now: float) -> list[Sample]:
    """Every exported sample of the monitor's windowed families, from a store's frame."""
    return samples(FrameColumns(frame), settings, now)


def samples(
    cols: FrameColumns | Mapping[tuple[Series, str], Column], settings: WindowSettings, now: float
) -> list[Sample]:
    """Every exported sample of the windowed families, from each (series, traffic|canary) column."""
    fresh_after = now - settings.stale_after_s
    out: list[Sample] = []
    for (series, kind), col in cols.items():
        det, ver, cond = series
        base = cols.get(((det, ver, "original"), kind)) if cond != "original" else None
        ident = {"detector": det, "version": ver, "condition": cond}
        if col.t[-1] >= fresh_after:
            out.append(Sample(mc.LAST_SAMPLE_TIME, {**ident, "population": kind}, float(col.t.max())))
            for window, sel in windows_of(every(len(col.t)), settings.count):
                out += _label_free(col, sel, base, {**ident, "window": window, "population": kind}, settings.confidence)
        known = np.flatnonzero(col.label >= 0)
        population = "canary" if kind == "canary" else "labelled"
        if known.size and col.t[known].max() >= fresh_after:
            if population != kind:
                # a canary series has one timestamp
                out.append(Sample(mc.LAST_SAMPLE_TIME, {**ident, "population": population}, float(col.t[known].max())))
            for window, sel in windows_of(known, settings.count):
                labels = {**ident, "window": window, "population": population}
                out += _labelled(col, sel, base, labels, settings.confidence)
    return out


def windows_of(idx: np.ndarray, count: int) -> Iterator[tuple[str, np.ndarray]]:
    """The windows of positions ``idx`` (in event time order): ``time`` (all of them, the store holding only the
    time window's videos) and ``count`` (the last ``count``)."""
    yield "time", idx
    yield "count", idx[-count:]


def _paired(col: Column, sel: np.ndarray, base: Column | None) -> tuple[np.ndarray, np.ndarray]:
    """Positions in ``col`` (within ``sel``) and in ``base`` of the videos scored under both."""
    if base is None:
        return np.empty(0, int), np.empty(0, int)
    if is_everything(sel, col.vid.size) and np.array_equal(col.vid, base.vid):
        # the same videos (common)
        return sel, sel
    where, v = base.where(), col.vid[sel]
    in_base = np.full(v.size, -1, np.int64)
    inside = v < where.size
    in_base[inside] = where[v[inside]]
    paired = in_base >= 0
    return sel[paired], in_base[paired]


def _at(values: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """``values[positions]``, without a copy when the positions are all of them in order (the common case)."""
    return values if is_everything(positions, values.size) else values[positions]


def bounded_samples(
    family: Family, labels: dict, interval: tuple[float, float, float], delong: bool = False
) -> list[Sample]:
    """An (estimate, lower, upper) interval as three samples: the family's and its two bounds' families; and, for a
    ``delong`` interval (which collapses where every structural component is constant), whether it has zero width, as
    a sample of the family's flag (:meth:`~gateway.core.catalogue.Family.zero_width`) naming the family."""
    (est, lo, hi), (lower, upper) = interval, family.bounds()
    out = [Sample(family, labels, est), Sample(lower, labels, lo), Sample(upper, labels, hi)]
    if delong:
        out.append(Sample(family.zero_width(), {**labels, "quantity": family.name}, float(lo == hi)))
    return out


def _wilson(rate: float, successes: int, n: int, conf: float) -> tuple[float, float, float]:
    """A :class:`~detectors.stats.metrics.Confusion` rate with the Wilson interval of its counts."""
    _, lo, hi = intervals.wilson_interval(successes, n, conf)
    return rate, lo, hi


def _label_free(col: Column, sel: np.ndarray, base: Column | None, labels: dict, conf: float) -> list[Sample]:
    out = [Sample(mc.WINDOW_VIDEOS, labels, float(sel.size))]
    # (a window is never empty) called generated, labelled
    called = int(np.count_nonzero(_at(col.decision, sel)))
    # or not
    out += bounded_samples(mc.GENERATED_RATE, labels, _wilson(called / sel.size, called, int(sel.size), conf))
    if base is None:
        return out
    a, b = _paired(col, sel, base)
    out.append(Sample(mc.PAIRED_VIDEOS, labels, float(a.size)))
    if not a.size:
        return out
    here, there = _at(col.score, a), _at(base.score, b)
    out.append(Sample(mc.SCORE_SHIFT_MEAN, labels, float(np.mean(here - there))))
    out.append(Sample(mc.SCORE_KS, labels, intervals.ks_of_ascending(col.ascending(a), base.ascending(b))))
    # pairs by (decision here, decision on original): False False, False True, True False, True True
    ff, ft, tf, tt = np.bincount(2 * _at(col.decision, a).astype(np.int8) + _at(base.decision, b), minlength=4).tolist()
    for direction, flipped, kept in (("real_to_generated", tf, ff), ("generated_to_real", ft, tt)):
        if flipped + kept:
            # a proportion of the videos so decided on original, with its Wilson interval
            rate = _wilson(flipped / (flipped + kept), flipped, flipped + kept, conf)
            out += bounded_samples(mc.FLIP_RATE, {**labels, "direction": direction}, rate)
    return out


def _labelled(col: Column, sel: np.ndarray, base: Column | None, labels: dict, conf: float) -> list[Sample]:
    y = col.label[sel] == 1
    c = metrics.Confusion.from_predictions(y, col.decision[sel])
    n_gen, n_real = c.tp + c.fn, c.tn + c.fp
    out = [
        Sample(mc.WINDOW_SAMPLES, {**labels, "label": "generated"}, float(n_gen)),
        Sample(mc.WINDOW_SAMPLES, {**labels, "label": "real"}, float(n_real)),
    ]
    if n_gen:
        out += bounded_samples(mc.FAKE_RECALL, labels, _wilson(c.fake_recall, c.tp, n_gen, conf))
    if n_real:
        out += bounded_samples(mc.REAL_RECALL, labels, _wilson(c.real_recall, c.tn, n_real, conf))
    if n_gen and n_real:
        out.append(Sample(mc.BALANCED_ACCURACY, labels, c.balanced_accuracy))
        if n_gen >= 2 and n_real >= 2:
            auc = intervals.contrast_interval([col.components(sel)], (1,), conf)
            out += bounded_samples(mc.AUC, labels, auc, delong=True)
        else:
            out.append(Sample(mc.AUC, labels, metrics.auc(y, col.score[sel])))
    if base is not None:
        out += _drift(col, sel, base, labels, conf)
    return out


def _drift(col: Column, sel: np.ndarray, base: Column, labels: dict, conf: float) -> list[Sample]:
    a, b = _paired(col, sel, base)
    y = col.label[a] == 1
    out = [Sample(mc.PAIRED_SAMPLES, labels, float(a.size))]
    # the pairs by (label, decision here, decision on original): 8 counts in one pass
    n = np.bincount(4 * y.astype(np.int8) + 2 * _at(col.decision, a) + _at(base.decision, b), minlength=8).tolist()
    if sum(n[4:]) >= 2 and sum(n[:4]) >= 2:
        diff = intervals.contrast_interval([col.components(a), base.components(b)], (1, -1), conf)
        out += bounded_samples(mc.AUC_DRIFT, labels, diff, delong=True)
    if sum(n[4:]):
        # generated: called generated (True) under both, here only, on original only, neither
        out += bounded_samples(
            mc.FAKE_RECALL_DRIFT, labels, intervals.paired_proportion_difference_of(n[7], n[6], n[5], n[4], conf)
        )
    if sum(n[:4]):
        # real: called real (False) under both, here only, on original only, neither
        out += bounded_samples(
            mc.REAL_RECALL_DRIFT, labels, intervals.paired_proportion_difference_of(n[0], n[1], n[2], n[3], conf)
        )
    return out
