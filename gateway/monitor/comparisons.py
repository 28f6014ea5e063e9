"""Champion against challenger in the monitor's windowed computation: per configured comparison and condition,
each quantity of :mod:`gateway.core.ab_quantities` with its live interval (DeLong for the AUC and robustness
differences, Newcombe's paired interval for the FakeR, RealR and flip-rate differences).

The videos of the comparison's population (traffic, or the labelled canaries of ``lastmile canary run``) scored by
both under the condition and, away from ``original``, by both under ``original`` too
(:func:`~gateway.core.ab_quantities.scores_needed`), so every series of a window counts the same videos. Windows
as for the other series: ``time`` (every such video of the last ``windows.seconds``) and ``count`` (the latest
``windows.count`` of them; labelled ones for the labelled quantities).
"""

from __future__ import annotations

import functools

import numpy as np

from detectors.stats import intervals
from gateway.core import ab_quantities as ab
from gateway.core import catalogue as mc
from gateway.core.contenders import Contender
from gateway.monitor.config import ComparisonSettings, WindowSettings
from gateway.monitor.signals import Column, FrameColumns, Sample, bounded_samples, windows_of
from gateway.monitor.table import Frame


def resolve(frame: Frame, cols: FrameColumns, contender: str, population: str) -> tuple[str, str] | None:
    """``DETECTOR@VERSION`` (or a recalibration of it, ``VERSION+cal-...``), or ``DETECTOR``, with the version whose
    latest event is newest among those scored in ``population`` (a comparison on canaries is not one on traffic);
    None when no event of that population carries it."""
    parsed = Contender.parse(contender)
    det, ver = parsed.detector, parsed.version
    latest = {
        v: _latest(frame, cols, (det, v), population) for v in sorted({v for (d, v, _c) in frame.rows if d == det})
    }
    versions = [v for v, t in latest.items() if t > -np.inf]
    if ver:
        # a pinned version and its recalibrations, VERSION+cal-...: the newest of them
        versions = [v for v in versions if v == ver or v.startswith(f"{ver}+cal-")]
    return (det, max(versions, key=latest.__getitem__)) if versions else None


def _latest(frame: Frame, cols: FrameColumns, who: tuple[str, str], population: str) -> float:
    """The newest event time of ``who``'s scores of live videos in ``population``, over its conditions (-inf:
    none); from the frame's arrays, without building the series' columns."""
    canary, times, best = frame.videos["canary"], frame.videos["event_time"], -np.inf
    for (d, v, _c), (slot, _score, _decision) in frame.rows.items():
        if (d, v) == who and slot.size:
            mine = slot[(cols.rank[slot] >= 0) & (canary[slot] == (population == "canary"))]
            if mine.size:
                best = max(best, float(times[mine].max()))
    return best


def comparison_samples(
    frame: Frame, comparisons: list[ComparisonSettings], settings: WindowSettings, now: float
) -> list[Sample]:
    """Every sample of the comparison families for ``comparisons`` on one frame of the store."""
    cols, out = FrameColumns(frame), []
    for cmp in comparisons:
        ident = {"champion": cmp.champion, "challenger": cmp.challenger, "population": cmp.population}
        out += [
            Sample(mc.COMPARISON_MARGIN, ident, cmp.margin),
            Sample(mc.COMPARISON_MIN_SAMPLES, ident, cmp.min_samples),
        ]
        # scored in the comparison's population
        champ = resolve(frame, cols, cmp.champion, cmp.population)
        chall = resolve(frame, cols, cmp.challenger, cmp.population)
        for role, found in zip(ab.ROLES, (champ, chall), strict=True):
            out.append(Sample(mc.COMPARISON_CONTENDER_SCORED, {**ident, "role": role}, float(found is not None)))
        if champ is None or chall is None or champ == chall:
            continue
        conditions = sorted(
            {c for (d, v, c) in frame.rows if (d, v) == champ} & {c for (d, v, c) in frame.rows if (d, v) == chall}
        )
        who = dict(zip(ab.ROLES, (champ, chall), strict=True))
        for cond in conditions:
            out += _condition(cols, who, cond, {**ident, "condition": cond}, settings, now, cmp.population)
    return out


# per (role, condition) of :func:`ab.scores_needed`, on the same videos
Scores = dict[tuple[str, str], np.ndarray]


def _condition(
    cols: FrameColumns,
    who: dict[str, tuple[str, str]],
    cond: str,
    ident: dict,
    settings: WindowSettings,
    now: float,
    population: str,
) -> list[Sample]:
    """Every series of one comparison under ``cond``; ``who``: each role's (detector, version)."""
    keys = ab.scores_needed(cond)
    got = {(role, c): cols.get(((*who[role], c), population)) for role, c in keys}
    if any(g is None for g in got.values()):
        return []
    shared = functools.reduce(np.intersect1d, (g.vid for g in got.values()))
    # video indices are event-time ranks: sorted is oldest first
    if not shared.size:
        return []
    pos = {key: g.where()[shared] for key, g in got.items()}
    first = keys[0]
    if got[first].t[pos[first]].max() < now - settings.stale_after_s:
        return []
    out = []
    known = np.flatnonzero(got[first].label[pos[first]] >= 0)
    for window, sel in windows_of(np.arange(shared.size), settings.count):
        decisions = {key: got[key].decision[p[sel]] for key, p in pos.items()}
        out += _label_free(decisions, cond, {**ident, "window": window}, settings.confidence)
    for window, sel in windows_of(known, settings.count):
        at = {key: p[sel] for key, p in pos.items()}
        out += _labelled(got, at, cond, {**ident, "window": window}, settings.confidence)
    return out


def _label_free(dec: Scores, cond: str, labels: dict, conf: float) -> list[Sample]:
    """The videos compared, the share decided differently and, under a condition, the difference of the flip rates
    (each video's flip from original, challenger's against champion's: paired, so Newcombe's method 10 interval, as
    the offline comparison's score interval)."""
    champ, chall = dec["champion", cond], dec["challenger", cond]
    out = [Sample(mc.COMPARISON_VIDEOS, labels, float(champ.size))]
    out.append(Sample(mc.COMPARISON_DISAGREEMENT, labels, float(np.mean(champ != chall))))
    if ab.FLIP_RATE_DIFFERENCE.defined_under(cond):
        flipped = {role: dec[role, cond] != dec[role, ab.ORIGINAL] for role in ab.ROLES}
        flips = intervals.paired_proportion_difference(flipped["challenger"], flipped["champion"], conf)
        out += bounded_samples(mc.COMPARISON_FLIP_RATE_DIFFERENCE, labels, flips)
    return out


def _labelled(got: dict[tuple[str, str], Column], pos: Scores, cond: str, labels: dict, conf: float) -> list[Sample]:
    """The labelled videos compared, the AUC and robustness differences (DeLong) and the FakeR and RealR
    differences at each contender's decisions (Newcombe's paired interval)."""
    first = next(iter(pos))
    y = got[first].label[pos[first]] == 1
    score = {key: got[key].score[p] for key, p in pos.items()}
    champ, chall = (got[role, cond].decision[pos[role, cond]] for role in ab.ROLES)
    out = [Sample(mc.COMPARISON_SAMPLES, labels, float(y.size))]
    if y.sum() >= 2 and (~y).sum() >= 2:
        diff = intervals.auc_difference(y, score["champion", cond], score["challenger", cond], conf)
        out += bounded_samples(mc.COMPARISON_AUC_DIFFERENCE, labels, diff, delong=True)
        if ab.ROBUSTNESS_DIFFERENCE.defined_under(cond):
            h, c = ((score[role, ab.ORIGINAL], score[role, cond]) for role in ab.ROLES)
            rob = intervals.robustness_difference(y, h, c, conf)
            out += bounded_samples(mc.COMPARISON_ROBUSTNESS_DIFFERENCE, labels, rob, delong=True)
    if y.any():
        fr = intervals.paired_proportion_difference(chall[y], champ[y], conf)
        out += bounded_samples(mc.COMPARISON_FAKE_RECALL_DIFFERENCE, labels, fr)
    if (~y).any():
        rr = intervals.paired_proportion_difference(~chall[~y], ~champ[~y], conf)
        out += bounded_samples(mc.COMPARISON_REAL_RECALL_DIFFERENCE, labels, rr)
    return out
