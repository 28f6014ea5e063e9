"""Champion against challenger in the monitor's windowed computation (issue 25).

Per configured comparison and condition, on the videos of its population (traffic, or the labelled canaries of
``lastmile canary run``) scored by both under the condition and, away from
``original``, by both under ``original`` too (so all four AUCs are on the same videos): the AUC difference
(challenger minus champion, DeLong), the robustness difference (challenger's AUC drift minus champion's, DeLong's
contrast of four correlated AUCs), the FakeR and RealR differences at each one's own decisions (Newcombe's paired
interval), the share of videos they decide differently and the difference of their flip rates. Windows as for
the other series: ``time`` (every such video of the last ``windows.seconds``) and ``count`` (the latest
``windows.count`` of them; labelled ones for the labelled quantities).
"""

from __future__ import annotations

import numpy as np

from detectors.stats import intervals
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
    if ver:  # (a pinned version and its recalibrations, VERSION+cal-...: the newest of them)
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
        champ = resolve(frame, cols, cmp.champion, cmp.population)  # scored in the comparison's population
        chall = resolve(frame, cols, cmp.challenger, cmp.population)
        for role, found in zip(("champion", "challenger"), (champ, chall), strict=True):
            out.append(Sample(mc.COMPARISON_CONTENDER_SCORED, {**ident, "role": role}, float(found is not None)))
        if champ is None or chall is None or champ == chall:
            continue
        conditions = sorted(
            {c for (d, v, c) in frame.rows if (d, v) == champ} & {c for (d, v, c) in frame.rows if (d, v) == chall}
        )
        for cond in conditions:
            out += _condition(cols, champ, chall, cond, {**ident, "condition": cond}, settings, now, cmp.population)
    return out


def _condition(
    cols: FrameColumns, champ, chall, cond: str, ident: dict, settings: WindowSettings, now: float, population: str
):
    need = [(champ, cond), (chall, cond)] + ([(champ, "original"), (chall, "original")] if cond != "original" else [])
    got = [cols.get(((*who, c), population)) for who, c in need]
    if any(g is None for g in got):
        return []
    shared = got[0].vid
    for g in got[1:]:
        shared = np.intersect1d(shared, g.vid)  # video indices are event-time ranks: sorted is oldest first
    if not shared.size:
        return []
    pos = [g.where()[shared] for g in got]
    if got[0].t[pos[0]].max() < now - settings.stale_after_s:
        return []
    out = []
    known = np.flatnonzero(got[0].label[pos[0]] >= 0)
    for window, sel in windows_of(np.arange(shared.size), settings.count):
        labels = {**ident, "window": window}
        out += _label_free(got, [p[sel] for p in pos], labels, settings.confidence)
    for window, sel in windows_of(known, settings.count):
        out += _labelled(got, [p[sel] for p in pos], {**ident, "window": window}, settings.confidence)
    return out


def _label_free(got: list[Column], pos: list[np.ndarray], labels: dict, conf: float) -> list[Sample]:
    """The videos compared, the share decided differently and, under a condition, the difference of the flip rates
    (each video's flip from original, challenger's against champion's: paired, so Newcombe's method 10 interval, as
    the offline comparison's score interval)."""
    dec = [g.decision[p] for g, p in zip(got, pos, strict=True)]
    out = [Sample(mc.COMPARISON_VIDEOS, labels, float(pos[0].size))]
    out.append(Sample(mc.COMPARISON_DISAGREEMENT, labels, float(np.mean(dec[0] != dec[1]))))
    if len(dec) == 4:
        flips = intervals.paired_proportion_difference(dec[1] != dec[3], dec[0] != dec[2], conf)
        out += bounded_samples(mc.COMPARISON_FLIP_RATE_DIFFERENCE, labels, flips)
    return out


def _labelled(got: list[Column], pos: list[np.ndarray], labels: dict, conf: float) -> list[Sample]:
    y = got[0].label[pos[0]] == 1
    score = [g.score[p] for g, p in zip(got, pos, strict=True)]
    dec = [g.decision[p] for g, p in zip(got, pos, strict=True)]
    out = [Sample(mc.COMPARISON_SAMPLES, labels, float(y.size))]
    if y.sum() >= 2 and (~y).sum() >= 2:
        diff = intervals.auc_difference(y, score[0], score[1], conf)
        out += bounded_samples(mc.COMPARISON_AUC_DIFFERENCE, labels, diff, delong=True)
        if len(score) == 4:
            rob = intervals.robustness_difference(y, (score[2], score[0]), (score[3], score[1]), conf)
            out += bounded_samples(mc.COMPARISON_ROBUSTNESS_DIFFERENCE, labels, rob, delong=True)
    if y.any():
        fr = intervals.paired_proportion_difference(dec[1][y], dec[0][y], conf)
        out += bounded_samples(mc.COMPARISON_FAKE_RECALL_DIFFERENCE, labels, fr)
    if (~y).any():
        rr = intervals.paired_proportion_difference(~dec[1][~y], ~dec[0][~y], conf)
        out += bounded_samples(mc.COMPARISON_REAL_RECALL_DIFFERENCE, labels, rr)
    return out
