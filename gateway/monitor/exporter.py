"""The monitor's /metrics: the windowed families of the latest completed computation
(:mod:`gateway.monitor.windows`), with the time it was made, and the monitor's own operational series (events
and labels by outcome, videos held, lag, broker up).

While the monitor is rebuilding its windows from the topics (after a start or a restart) the windowed
families are withheld: a partial window is never presented as the current one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric

from gateway.core import catalogue as mc
from gateway.monitor.config import ComparisonSettings, WindowSettings
from gateway.monitor.store import Store
from gateway.monitor.windows import Windows


class WindowCollector:
    """Yields every family the catalogue lists for ``windows`` (empty while not ``ready()``) from the latest
    computation, and its time; a scrape computes nothing unless no computation runs in the background."""

    def __init__(self, windows: Windows, ready: Callable[[], bool]) -> None:
        self.windows, self.ready = windows, ready

    @staticmethod
    def _families() -> dict[str, Metric]:
        computed = (*mc.families(mc.Exporter.WINDOWS), *mc.families(mc.Exporter.COMPARISONS), mc.MONITOR_COMPUTED_TIME)
        return {f.name: mc.snapshot_family(f) for f in computed}

    def describe(self) -> list[Metric]:
        return list(self._families().values())

    def collect(self) -> Iterator[Metric]:
        fams = self._families()
        if self.ready():
            done = self.windows.latest
            if done is None and not self.windows.background:
                done = self.windows.refresh()
            if done is not None:
                for s in done.samples:
                    fams[s.name].add_metric([s.labels[n] for n in s.family.labels], s.value)
                fams[mc.MONITOR_COMPUTED_TIME.name].add_metric([], done.at)
        yield from fams.values()


class StoreCollector:
    """What the store counted: score events and labels by outcome, videos held, labels waiting; from its
    :class:`~gateway.monitor.store.Tally`, so a scrape never waits for the store's lock."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def describe(self) -> list[Metric]:
        return list(self._families())

    def _families(self) -> tuple[Metric, ...]:
        return tuple(
            mc.snapshot_family(f)
            for f in (mc.MONITOR_EVENTS, mc.MONITOR_LABELS, mc.MONITOR_VIDEOS, mc.MONITOR_WAITING_LABELS)
        )

    def collect(self) -> Iterator[Metric]:
        events, labels, videos, waiting = self._families()
        tally = self.store.tally
        for outcome, n in sorted(tally.events.items()):
            events.add_metric([outcome], n)
        for outcome, n in sorted(tally.labels.items()):
            labels.add_metric([outcome], n)
        videos.add_metric([], tally.held)
        waiting.add_metric([], tally.waiting)
        yield from (events, labels, videos, waiting)


class MonitorMetrics:
    def __init__(
        self,
        store: Store,
        settings: WindowSettings,
        clock: Callable[[], float],
        ready: Callable[[], bool],
        registry: CollectorRegistry | None = None,
        comparisons: list[ComparisonSettings] | None = None,
    ) -> None:
        self.registry = r = registry or CollectorRegistry()
        self.runtime_up = mc.instrument(mc.RUNTIME_UP, r)
        self.lag = mc.instrument(mc.MONITOR_LAG, r)
        self.caught_up = mc.instrument(mc.MONITOR_CAUGHT_UP, r)
        self.invalid = mc.instrument(mc.MONITOR_INVALID, r)
        seconds = mc.instrument(mc.MONITOR_COMPUTE_SECONDS, r)
        self.windows = Windows(store, settings, clock, seconds, comparisons)
        r.register(WindowCollector(self.windows, ready))
        r.register(StoreCollector(store))
