"""The monitor's /metrics: the windowed families, computed at scrape time from a snapshot of the store, and
its own operational series (events and labels by outcome, videos held, lag, broker up).

While the monitor is rebuilding its windows from the topics (after a start or a restart) the windowed
families are withheld: a partial window is never presented as the current one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import Metric

from gateway.core import catalogue as mc
from gateway.monitor.config import WindowSettings
from gateway.monitor.signals import compute
from gateway.monitor.store import Store


class WindowCollector:
    """Yields every family the catalogue lists for ``windows`` (empty while not ``ready()``)."""

    def __init__(
        self,
        store: Store,
        settings: WindowSettings,
        clock: Callable[[], float],
        ready: Callable[[], bool],
        seconds: Histogram,
    ) -> None:
        self.store, self.settings, self.clock, self.ready, self.seconds = store, settings, clock, ready, seconds

    @staticmethod
    def _families() -> dict[str, Metric]:
        return {f.name: mc.snapshot_family(f) for f in mc.families(mc.Exporter.WINDOWS)}

    def describe(self) -> list[Metric]:
        return list(self._families().values())

    def collect(self) -> Iterator[Metric]:
        fams = self._families()
        if self.ready():
            t0 = time.perf_counter()
            for s in compute(self.store.snapshot(), self.settings, self.clock()):
                fams[s.name].add_metric([s.labels[n] for n in s.family.labels], s.value)
            self.seconds.observe(time.perf_counter() - t0)
        yield from fams.values()


class StoreCollector:
    """What the store counted: score events and labels by outcome, videos held, labels waiting."""

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
        with self.store.lock:
            for outcome, n in sorted(self.store.events.items()):
                events.add_metric([outcome], n)
            for outcome, n in sorted(self.store.labels.items()):
                labels.add_metric([outcome], n)
            videos.add_metric([], len(self.store.videos))
            waiting.add_metric([], self.store.waiting_count)
        yield from (events, labels, videos, waiting)


class MonitorMetrics:
    def __init__(
        self,
        store: Store,
        settings: WindowSettings,
        clock: Callable[[], float],
        ready: Callable[[], bool],
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.registry = r = registry or CollectorRegistry()
        self.runtime_up = mc.instrument(mc.RUNTIME_UP, r)
        self.lag = mc.instrument(mc.MONITOR_LAG, r)
        self.caught_up = mc.instrument(mc.MONITOR_CAUGHT_UP, r)
        self.invalid = mc.instrument(mc.MONITOR_INVALID, r)
        seconds = mc.instrument(mc.MONITOR_COMPUTE_SECONDS, r)
        r.register(WindowCollector(store, settings, clock, ready, seconds))
        r.register(StoreCollector(store))
