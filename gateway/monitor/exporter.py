"""The monitor's /metrics: the windowed families, computed at scrape time from a snapshot of the store, and
its own operational series (events and labels by outcome, videos held, lag, broker up).

While the monitor is rebuilding its windows from the topics (after a start or a restart) the windowed
families are withheld: a partial window is never presented as the current one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from gateway.monitor.config import WindowSettings
from gateway.monitor.signals import FAMILIES, compute
from gateway.monitor.store import Store


class WindowCollector:
    """Yields every family of :data:`~gateway.monitor.signals.FAMILIES` (empty while not ``ready()``)."""

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
    def _families() -> dict[str, GaugeMetricFamily]:
        return {name: GaugeMetricFamily(name, text, labels=list(lbls)) for name, (text, lbls) in FAMILIES.items()}

    def describe(self) -> list[Metric]:
        return list(self._families().values())

    def collect(self) -> Iterator[Metric]:
        fams = self._families()
        if self.ready():
            t0 = time.perf_counter()
            for s in compute(self.store.snapshot(), self.settings, self.clock()):
                _, names = FAMILIES[s.name]
                fams[s.name].add_metric([s.labels[n] for n in names], s.value)
            self.seconds.observe(time.perf_counter() - t0)
        yield from fams.values()


class StoreCollector:
    """What the store counted: score events and labels by outcome, videos held, labels waiting."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def describe(self) -> list[Metric]:
        return list(self._families())

    def _families(self) -> tuple[Metric, ...]:
        return (
            CounterMetricFamily("lastmile_monitor_events", "Score events read, by outcome", labels=["outcome"]),
            CounterMetricFamily("lastmile_monitor_labels", "Label events read, by outcome", labels=["outcome"]),
            GaugeMetricFamily("lastmile_monitor_videos", "Videos held in the time window"),
            GaugeMetricFamily("lastmile_monitor_waiting_labels", "Labels waiting for their video's scores"),
        )

    def collect(self) -> Iterator[Metric]:
        events, labels, videos, waiting = self._families()
        with self.store.lock:
            for outcome, n in sorted(self.store.events.items()):
                events.add_metric([outcome], n)
            for outcome, n in sorted(self.store.labels.items()):
                labels.add_metric([outcome], n)
            videos.add_metric([], len(self.store.videos))
            waiting.add_metric([], len(self.store.waiting))
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
        self.runtime_up = Gauge(
            "lastmile_runtime_up", "1 while the component answers, 0 while it is unavailable", ["component"], registry=r
        )
        self.lag = Gauge("lastmile_monitor_lag_messages", "Messages behind the end of a topic", ["topic"], registry=r)
        self.caught_up = Gauge(
            "lastmile_monitor_caught_up", "1 once the windows are rebuilt from the topics since start", registry=r
        )
        self.invalid = Counter(
            "lastmile_monitor_invalid_messages", "Unreadable messages skipped", ["topic"], registry=r
        )
        seconds = Histogram(
            "lastmile_monitor_compute_seconds", "Time to compute the windowed families at a scrape", registry=r
        )
        r.register(WindowCollector(store, settings, clock, ready, seconds))
        r.register(StoreCollector(store))
