"""The windowed statistics, computed off the scrape path: a thread of the monitor computes every windowed sample
from a :class:`~gateway.monitor.table.Frame` of the store every ``windows.compute_interval_s`` (and at once when
the windows are rebuilt), and a scrape serves the latest completed computation, with the time it was made."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from prometheus_client import Histogram

from gateway.monitor import allocator
from gateway.monitor.comparisons import comparison_samples
from gateway.monitor.config import ComparisonSettings, WindowSettings
from gateway.monitor.signals import Sample, compute
from gateway.monitor.store import Store

log = logging.getLogger("lastmile.monitor")


@dataclass(frozen=True)
class Computation:
    samples: list[Sample]
    # the monitor's clock when its frame was taken
    at: float
    # how long it took
    seconds: float


class Windows:
    """The latest computation. Until :meth:`run` is started, a scrape that finds none computes one itself (a
    monitor embedded in a test or a benchmark); a running monitor's scrapes never compute."""

    def __init__(
        self,
        store: Store,
        settings: WindowSettings,
        clock: Callable[[], float],
        seconds: Histogram,
        comparisons: list[ComparisonSettings] | None = None,
    ):
        self.store, self.settings, self.clock, self.seconds = store, settings, clock, seconds
        self.comparisons = comparisons or []
        self.latest: Computation | None = None
        self.background = False
        # compute now rather than at the next interval
        self.kick = threading.Event()
        # one computation at a time
        self._lock = threading.Lock()

    def refresh(self) -> Computation:
        with self._lock:
            t0 = time.perf_counter()
            now = self.clock()
            frame = self.store.frame()
            samples = compute(frame, self.settings, now)
            if self.comparisons:
                samples += comparison_samples(frame, self.comparisons, self.settings, now)
            del frame
            # what the computation freed (about 200 MB at a million videos otherwise stays)
            allocator.give_back()
            took = time.perf_counter() - t0
            self.latest = Computation(samples, now, took)
            self.seconds.observe(took)
            return self.latest

    def run(self, stop: threading.Event, ready: Callable[[], bool]) -> None:
        """Compute while ``ready()`` (the windows are rebuilt), every interval or when kicked, until ``stop``."""
        self.background = True
        while not stop.is_set():
            self.kick.wait(self.settings.compute_interval_s)
            self.kick.clear()
            if ready() and not stop.is_set():
                try:
                    self.refresh()
                except Exception:
                    # a failed computation keeps the previous one served; the next one may pass
                    log.exception("windowed computation failed")

    def start(self, stop: threading.Event, ready: Callable[[], bool]) -> threading.Thread:
        self.background = True
        thread = threading.Thread(target=self.run, args=(stop, ready), name="monitor-windows", daemon=True)
        thread.start()
        return thread
