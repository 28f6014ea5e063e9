"""``lastmile bench monitor``: score events per second the monitor sustains on one core, with its windows full
(the reference detectors x the six LastMile conditions, 10,000 videos per series) and a Prometheus scrape every
``scrape_interval_s``.

The job runs in its own process pinned to one core (BLAS threads 1). Events are real ``ScoreEvent`` JSON, read
through the same :meth:`Monitor.handle` as the Kafka loop (parse, de-duplicate, store); the broker's own cost
is left out. Three numbers, all from one run: the ingest rate alone, the time of one scrape with full
windows, and the rate with one scrape per interval of traffic at that rate.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from detectors.reference.registry import REFERENCE_DETECTORS
from gateway.ops.measure import isolated
from transforms.spec import LASTMILE

DETECTORS = tuple(d.name for d in REFERENCE_DETECTORS)  # the shipped reference detectors
CONDITIONS = tuple(c.name for c in LASTMILE)  # the six LastMile conditions


def _events(videos: int, start: int, now: float, seed: int = 0) -> list[bytes]:
    """Events of videos start..start+videos, one every 20 ms of event time up to ``now`` (all fresh)."""
    from gateway.core.messages import ScoreEvent, idempotency_key

    rng = np.random.default_rng(seed + start)
    out = []
    for i in range(start, start + videos):
        vid, label = f"b{i}", ("real", "generated")[i % 2]
        for det in DETECTORS:
            for cond in CONDITIONS:
                s = float(rng.normal(1.0 if i % 2 else -1.0))
                out.append(
                    ScoreEvent(video_id=vid, condition=cond, detector=det, detector_version="1", runtime="embedded",
                               score=s, decision=s > 0, threshold=0.0, label=label, event_time=now - 600 + i * 0.02,
                               idempotency_key=idempotency_key(vid, cond, det, "1")).model_dump_json().encode()
                )  # fmt: skip
    return out


def _job(window: int, extra_videos: int, scrape_interval_s: float) -> dict[str, float]:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    from prometheus_client import generate_latest

    from gateway.monitor.config import MonitorConfig, WindowSettings
    from gateway.monitor.service import Monitor

    now = time.time()
    mon = Monitor(MonitorConfig(windows=WindowSettings(count=window, max_videos=window + extra_videos + 10)))
    mon.caught_up.set()
    topic = mon.cfg.kafka.output_topic
    fill, more = _events(window, 0, now), _events(extra_videos, window, now)
    t0 = time.perf_counter()
    for value in fill:
        mon.handle(topic, value, None)
    fill_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    page = generate_latest(mon.metrics.registry)
    scrape_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for value in more:
        mon.handle(topic, value, None)
    ingest_s = time.perf_counter() - t0
    rate = len(more) / ingest_s
    scrapes = len(more) / rate / scrape_interval_s  # scrapes during that much traffic at that rate
    return {
        "fill_events": len(fill),
        "fill_events_per_s": round(len(fill) / fill_s, 1),
        "ingest_events_per_s": round(rate, 1),
        "scrape_s": round(scrape_s, 4),
        "scrape_bytes": len(page),
        "events_per_s_with_scrapes": round(len(more) / (ingest_s + scrapes * scrape_s), 1),
        "videos_held": len(mon.store.videos),
    }


def bench_monitor(window: int = 10_000, extra_videos: int = 2_000, scrape_interval_s: float = 15.0) -> dict[str, Any]:
    """The monitor's throughput on one core (see the module's docstring)."""
    os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    result = isolated(_job, window, extra_videos, scrape_interval_s)
    return {
        "detectors": len(DETECTORS),
        "conditions": len(CONDITIONS),
        "window_videos_per_series": window,
        "scrape_interval_s": scrape_interval_s,
        "cores": 1,
        **result,
        "target_events_per_s": 2000,
    }
