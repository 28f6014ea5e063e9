"""The monitor's live page (``/`` on its metrics port): what its ``/metrics`` says, drawn for a person.

The page is built from the families the registry's collectors yield, the very ones a scrape of ``/metrics``
serves (:mod:`gateway.monitor.exporter`), so the two cannot disagree: per (detector, version) a row per condition
with AUC, FakeR and RealR, their intervals and their drift from ``original``; per champion-challenger pair a
forest plot of the differences per condition; the label-free signals; and the alerts a Prometheus (the
``alerts_from`` setting) says are firing. Every name that came from a record is escaped by the template
(:mod:`jinja2`'s autoescape): a detector is named by whoever produced the score topic.

One window and one population are shown at a time (``?window=time|count``, ``?population=labelled|canary``).
This module says what the page shows (:func:`build`); :mod:`gateway.monitor.page_app` renders and serves it.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry

from gateway.core import catalogue as mc
from gateway.monitor.alerts import Alerts
from transforms.names import dissemination_order

WINDOWS = ("time", "count")
# populations of the labelled metrics: labelled traffic, labelled canaries
LABELLED = ("labelled", "canary")
# a score's shift and the KS statistic, to this many decimals
DIGITS = 3
# AUC, rates and their differences, in % (points for a difference), as the report shows them
PERCENT_DIGITS = 1
# how often the page's script fetches /live
REFRESH_S = 5
ORIGINAL = "original"
# shown as they are; every other family in %
RAW = (mc.SCORE_SHIFT_MEAN.name, mc.SCORE_KS.name)
POPULATION_TEXT = {"labelled": "labelled traffic", "canary": "labelled canaries", "traffic": "the traffic"}
WINDOW_TEXT = {"time": "time window", "count": "window of the latest videos"}


@dataclass(frozen=True)
class Estimate:
    """A value with its interval (absent for a family exported without one)."""

    value: float
    lower: float | None = None
    upper: float | None = None
    # as the monitor's zero-width flag says (DeLong's intervals: the others never collapse)
    zero_width: bool = False
    # shown x100 (a share, an AUC, their differences), else as it is
    percent: bool = True

    @property
    def text(self) -> str:
        return _fmt(self.value, self.percent)

    @property
    def interval(self) -> str:
        if self.lower is None or self.upper is None:
            return ""
        return f"[{_fmt(self.lower, self.percent)}, {_fmt(self.upper, self.percent)}]"

    @property
    def drawable(self) -> bool:
        return self.lower is not None and self.upper is not None and not math.isnan(self.value)

    @property
    def degenerate(self) -> bool:
        """An interval of zero width (every score of a component the same), as the monitor flags it
        (:data:`~gateway.core.catalogue.ZERO_WIDTH`): the page marks it, as the report does."""
        return self.zero_width and self.lower is not None

    @property
    def below_zero(self) -> bool:
        """The whole interval lies below zero (a drop that is not chance at the interval's confidence)."""
        return self.upper is not None and self.upper < 0


def _fmt(x: float, percent: bool = False) -> str:
    if math.isnan(x):
        return "–"
    return f"{100 * x:.{PERCENT_DIGITS}f}" if percent else f"{x:.{DIGITS}f}"


@dataclass
class ConditionMetrics:
    """One condition of a detector: the labelled metrics and their drift from ``original``."""

    condition: str
    auc: Estimate | None = None
    fake_recall: Estimate | None = None
    real_recall: Estimate | None = None
    auc_drift: Estimate | None = None
    fake_recall_drift: Estimate | None = None
    real_recall_drift: Estimate | None = None
    videos: int | None = None


@dataclass
class Signals:
    """One condition of a detector on the traffic, no label needed."""

    condition: str
    generated_rate: Estimate | None = None
    flips_to_generated: Estimate | None = None
    flips_to_real: Estimate | None = None
    score_shift: Estimate | None = None
    ks: Estimate | None = None


@dataclass
class Panel:
    detector: str
    version: str
    rows: list[ConditionMetrics] = field(default_factory=list)
    signals: list[Signals] = field(default_factory=list)

    @property
    def worst(self) -> ConditionMetrics | None:
        """The condition where it loses most AUC against ``original`` (its drift's value lowest), if any drift is
        known."""
        drifts = [r for r in self.rows if r.condition != ORIGINAL and r.auc_drift and not math.isnan(r.auc_drift.value)]
        return min(drifts, key=lambda r: r.auc_drift.value, default=None)

    @property
    def headline(self) -> str:
        """The finding, in one line: where the detector loses most, with the interval."""
        r = self.worst
        if r is None:
            return "No AUC drift yet: it needs labelled videos scored on original and under another condition."
        base = next((o.auc for o in self.rows if o.condition == ORIGINAL and o.auc), None)
        was = f" ({base.text} on original, {r.auc.text} under {r.condition})" if base and r.auc else ""
        verb = "Loses most" if r.auc_drift.value < 0 else "Loses no AUC; changes least favourably"
        sure = " (the whole interval below 0)" if r.auc_drift.below_zero else ""
        return f"{verb} under {r.condition}: AUC {r.auc_drift.text} points {r.auc_drift.interval}{was}{sure}."


@dataclass
class Difference:
    """One condition of a comparison: the challenger minus the champion."""

    condition: str
    auc: Estimate | None = None
    robustness: Estimate | None = None
    # the flip-rate difference (label-free: shown without labels too)
    flips: Estimate | None = None
    videos: int | None = None
    samples: int | None = None


@dataclass
class Comparison:
    champion: str
    challenger: str
    population: str
    margin: float | None
    min_samples: int | None
    rows: list[Difference] = field(default_factory=list)


@dataclass
class Page:
    # the windowed families are served (not withheld while the windows are rebuilt)
    ready: bool
    computed_at: float | None
    window: str
    population: str
    panels: list[Panel]
    comparisons: list[Comparison]
    alerts: Alerts
    videos_held: float | None = None
    events: dict[str, float] = field(default_factory=dict)
    # what fills the canary population, where the monitor was told it
    canary_command: str | None = None
    windows: tuple[str, ...] = WINDOWS
    populations: tuple[str, ...] = LABELLED
    refresh_s: int = REFRESH_S

    @property
    def computed_text(self) -> str:
        if self.computed_at is None:
            return "–"
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.computed_at))

    @property
    def population_text(self) -> str:
        return POPULATION_TEXT.get(self.population, self.population)

    @property
    def window_text(self) -> str:
        return WINDOW_TEXT.get(self.window, self.window)

    @property
    def held_text(self) -> str:
        held = "–" if self.videos_held is None else f"{int(self.videos_held):,}"
        read = ", ".join(f"{int(n):,} {outcome}" for outcome, n in sorted(self.events.items()))
        return f"{held} videos held; score events read: {read or 'none'}"


class Samples:
    """The samples of a registry's families, read once per page and indexed, so that a page costs one pass over
    them however many series there are (a scan per lookup grew with the square of the series)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.by_name: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
        for family in registry.collect():
            for s in family.samples:
                self.by_name[s.name].append((s.labels, s.value))
        self._sums: dict[tuple[str, frozenset[str]], dict[frozenset, float]] = {}

    def _index(self, name: str, keys: frozenset[str]) -> dict[frozenset, float]:
        """``name``'s samples summed by the values of the labels ``keys`` (built once per name and keys)."""
        if (name, keys) not in self._sums:
            sums: dict[frozenset, float] = defaultdict(float)
            for got, value in self.by_name.get(name, ()):
                if keys <= got.keys():
                    sums[frozenset((k, got[k]) for k in keys)] += value
            self._sums[name, keys] = dict(sums)
        return self._sums[name, keys]

    def value(self, name: str, **labels: str) -> float | None:
        """The sample of ``name`` with ``labels`` given all of its labels; given fewer, the sum of the samples that
        match them (the labelled videos of both labels, say); None where none does."""
        return self._index(name, frozenset(labels)).get(frozenset(labels.items()))

    def estimate(self, family: mc.Family, **labels: str) -> Estimate | None:
        value = self.value(family.name, **labels)
        if value is None:
            return None
        percent = family.name not in RAW
        if not family.interval:
            return Estimate(value, percent=percent)
        lower, upper = (self.value(f"{family.name}_{side}", **labels) for side in ("lower", "upper"))
        flagged = self.value(family.zero_width().name, quantity=family.name, **labels) == 1
        return Estimate(value, lower, upper, flagged, percent)

    def labels(self, name: str, keys: Iterable[str], **where: str) -> list[tuple[str, ...]]:
        """The distinct values of ``keys`` among ``name``'s samples that match ``where``."""
        keys = tuple(keys)
        seen = {
            tuple(got.get(k, "") for k in keys)
            for got, _ in self.by_name.get(name, ())
            if all(got.get(k) == v for k, v in where.items())
        }
        return sorted(seen)


def _conditions(names: Iterable[str]) -> list[str]:
    """In the order of dissemination: original, transcode, spatial, temporal, presentation, full, then the others."""
    return dissemination_order(names)


def build(
    registry: CollectorRegistry, query: Mapping[str, str], alerts: Alerts, canary_command: str | None = None
) -> Page:
    """The page for ``query`` (its ``window`` and ``population``; unknown values fall back to the first);
    ``canary_command``: what the page names where the canary population is empty."""
    s = Samples(registry)
    window = query.get("window") if query.get("window") in WINDOWS else WINDOWS[0]
    population = query.get("population") if query.get("population") in LABELLED else LABELLED[0]
    computed = s.value(mc.MONITOR_COMPUTED_TIME.name)
    events = {got.get("outcome", ""): v for got, v in s.by_name.get(f"{mc.MONITOR_EVENTS.name}_total", ())}
    comparisons = _comparisons(s, window)
    return Page(
        ready=computed is not None,
        computed_at=computed,
        window=window,
        population=population,
        panels=_panels(s, window, population),
        comparisons=comparisons,
        alerts=_without_waiting(alerts, comparisons),
        videos_held=s.value(mc.MONITOR_VIDEOS.name),
        events=events,
        canary_command=canary_command,
    )


WITHOUT_SCORES = "LastmileComparisonWithoutScores"


def _without_waiting(alerts: Alerts, comparisons: list[Comparison]) -> Alerts:
    """``alerts`` less the pending "no score events" alerts of comparisons the page already marks as waiting (an
    empty population, said with what fills it); a firing one (30 minutes without) stays."""
    waiting = {(c.champion, c.challenger, c.population) for c in comparisons if not c.rows}
    kept = tuple(
        a
        for a in alerts.alerts
        if not (
            a.name == WITHOUT_SCORES
            and a.state == "pending"
            and (a.labels.get("champion"), a.labels.get("challenger"), a.labels.get("population")) in waiting
        )
    )
    return dataclasses.replace(alerts, alerts=kept)


def _panels(s: Samples, window: str, population: str) -> list[Panel]:
    panels = []
    series = set(s.labels(mc.WINDOW_VIDEOS.name, ("detector", "version"), window=window))
    for detector, version in sorted(series):
        panel = Panel(detector, version)
        ident = {"detector": detector, "version": version, "window": window}
        labelled = {**ident, "population": population}
        # a window of real videos only has RealR alone
        rated = (mc.AUC, mc.FAKE_RECALL, mc.REAL_RECALL)
        conds = [c for f in rated for (c,) in s.labels(f.name, ("condition",), **labelled)]
        for cond in _conditions(conds):
            at = {**labelled, "condition": cond}
            # labelled videos, of either label
            videos = s.value(mc.WINDOW_SAMPLES.name, **at)
            panel.rows.append(
                ConditionMetrics(
                    cond,
                    auc=s.estimate(mc.AUC, **at),
                    fake_recall=s.estimate(mc.FAKE_RECALL, **at),
                    real_recall=s.estimate(mc.REAL_RECALL, **at),
                    auc_drift=s.estimate(mc.AUC_DRIFT, **at),
                    fake_recall_drift=s.estimate(mc.FAKE_RECALL_DRIFT, **at),
                    real_recall_drift=s.estimate(mc.REAL_RECALL_DRIFT, **at),
                    videos=None if videos is None else int(videos),
                )
            )
        traffic = {**ident, "population": "traffic"}
        for cond in _conditions(c for (c,) in s.labels(mc.WINDOW_VIDEOS.name, ("condition",), **traffic)):
            at = {**traffic, "condition": cond}
            panel.signals.append(
                Signals(
                    cond,
                    generated_rate=s.estimate(mc.GENERATED_RATE, **at),
                    flips_to_generated=s.estimate(mc.FLIP_RATE, **at, direction="real_to_generated"),
                    flips_to_real=s.estimate(mc.FLIP_RATE, **at, direction="generated_to_real"),
                    score_shift=s.estimate(mc.SCORE_SHIFT_MEAN, **at),
                    ks=s.estimate(mc.SCORE_KS, **at),
                )
            )
        if panel.rows or panel.signals:
            panels.append(panel)
    return panels


def _comparisons(s: Samples, window: str) -> list[Comparison]:
    out = []
    for champion, challenger, population in s.labels(mc.COMPARISON_MARGIN.name, mc.COMPARISON):
        pair = {"champion": champion, "challenger": challenger, "population": population}
        margin = s.value(mc.COMPARISON_MARGIN.name, **pair)
        least = s.value(mc.COMPARISON_MIN_SAMPLES.name, **pair)
        comparison = Comparison(champion, challenger, population, margin, None if least is None else int(least))
        conds = s.labels(mc.COMPARISON_VIDEOS.name, ("condition",), **pair, window=window)
        for cond in _conditions(c for (c,) in conds):
            at = {**pair, "window": window, "condition": cond}
            videos, samples = s.value(mc.COMPARISON_VIDEOS.name, **at), s.value(mc.COMPARISON_SAMPLES.name, **at)
            comparison.rows.append(
                Difference(
                    cond,
                    auc=s.estimate(mc.COMPARISON_AUC_DIFFERENCE, **at),
                    robustness=s.estimate(mc.COMPARISON_ROBUSTNESS_DIFFERENCE, **at),
                    flips=s.estimate(mc.COMPARISON_FLIP_RATE_DIFFERENCE, **at),
                    videos=None if videos is None else int(videos),
                    samples=None if samples is None else int(samples),
                )
            )
        out.append(comparison)
    return out
