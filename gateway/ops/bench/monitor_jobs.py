"""The monitor processes that ``lastmile bench monitor`` measures (:mod:`gateway.ops.bench.monitor`). Each runs
in a freshly spawned process, which imports this module to find its job: so this module imports only what
``lastmile monitor run`` loads (no transforms, no detectors), and a process's peak RSS is the monitor's own."""

from __future__ import annotations

import os
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np

READY_TIMEOUT_S = 3600.0
SLOW_SCRAPE_S = 0.2  # issue 24's bound on one scrape while ingesting


def _one_core() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def wait(check, what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the monitor did not {what}")
        time.sleep(0.01)  # the polling interval of a condition, not a synchronisation


def first_monitor(cfg_json: str, live_events: int, go: str) -> dict[str, float]:
    """Rebuild from the topic, compute, scrape; then scrape while ``live_events`` more are ingested (loaded by the
    bench's parent process once the file ``go`` exists); then checkpoint."""
    _one_core()
    from prometheus_client import generate_latest

    from gateway.core import catalogue as mc
    from gateway.monitor.config import MonitorConfig
    from gateway.monitor.service import Monitor

    mon = Monitor(MonitorConfig.model_validate_json(cfg_json))
    t0 = time.perf_counter()
    thread = threading.Thread(target=mon.run, daemon=True)
    thread.start()
    wait(mon.caught_up.is_set, "catch up")
    ingest_s, events = time.perf_counter() - t0, mon.store.events["added"]
    wait(lambda: mon.metrics.windows.latest is not None, "compute")
    t1 = time.perf_counter()
    page = generate_latest(mon.metrics.registry)
    scrape_s = time.perf_counter() - t1
    live = _scrapes_while_ingesting(mon, events + live_events, Path(go), generate_latest)
    t2 = time.perf_counter()
    mon.checkpoint()  # production is over: nothing is read meanwhile
    writer = mon.checkpoints._writer
    if writer is not None:
        writer.join()
    checkpoint_s = time.perf_counter() - t2
    samples = mon.metrics.windows.latest.samples
    with_auc = {(x.labels["detector"], x.labels["condition"]) for x in samples if x.family is mc.AUC}
    out = {
        "videos_held": mon.store.held,
        "ingest_events": events,
        "ingest_s": round(ingest_s, 2),
        "ingest_events_per_s": round(events / ingest_s, 1),
        "compute_s": round(mon.metrics.windows.latest.seconds, 3),
        "samples": len(samples),
        "series_with_auc": len(with_auc),
        "scrape_s": round(scrape_s, 4),
        "scrape_bytes": len(page),
        **live,
        "checkpoint_write_s": round(checkpoint_s, 2),
    }
    mon.stop_event.set()
    thread.join(60)
    return out


def _scrapes_while_ingesting(mon, total: int, go: Path, scrape) -> dict[str, float]:
    """Scrape back to back while the monitor ingests up to ``total`` added events (the parent loads them once
    ``go`` exists): the slowest and the median scrape, in process and over HTTP, the slowest and the median
    ``/healthz``, and the ingest rate meanwhile."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy

    def get(path: str) -> float:  # (an answer other than 2xx raises HTTPError)
        t = time.perf_counter()
        with opener.open(f"http://127.0.0.1:{mon.port}{path}", timeout=READY_TIMEOUT_S) as answer:
            if not answer.read():
                raise RuntimeError(f"{path} answered with nothing while the monitor ingested")
        return time.perf_counter() - t

    go.touch()
    times: dict[str, list[float]] = {"scrape": [], "http_scrape": [], "healthz": []}
    t0, before = time.perf_counter(), mon.store.events["added"]
    while mon.store.events["added"] < total:
        if time.perf_counter() - t0 > READY_TIMEOUT_S:
            raise TimeoutError("the monitor did not ingest the live events")
        t = time.perf_counter()
        scrape(mon.metrics.registry)
        times["scrape"].append(time.perf_counter() - t)
        times["http_scrape"].append(get("/metrics"))
        times["healthz"].append(get("/healthz"))
        time.sleep(0.05)  # the pace of the scrapes (about 10 a second, far more than Prometheus asks)
    took = time.perf_counter() - t0
    out: dict[str, float] = {"live_scrapes": len(times["scrape"])}
    for name, ts in times.items():
        out |= {
            f"live_{name}_max_s": round(max(ts, default=0.0), 4),
            f"live_{name}_p99_s": round(float(np.quantile(ts, 0.99)) if ts else 0.0, 4),
            f"live_{name}_median_s": round(float(np.median(ts)) if ts else 0.0, 4),
        }
    out["live_scrapes_over_200ms"] = sum(t > SLOW_SCRAPE_S for t in times["scrape"])
    out["live_http_scrapes_over_200ms"] = sum(t > SLOW_SCRAPE_S for t in times["http_scrape"])
    out["live_ingest_events_per_s"] = round((mon.store.events["added"] - before) / took, 1)
    return out


def restarted_monitor(cfg_json: str) -> dict[str, float]:
    """From the checkpoint to ready (windows restored, the tail read, one computation served)."""
    _one_core()
    from gateway.monitor.config import MonitorConfig
    from gateway.monitor.service import Monitor

    t0 = time.perf_counter()
    mon = Monitor(MonitorConfig.model_validate_json(cfg_json))
    thread = threading.Thread(target=mon.run, daemon=True)
    thread.start()
    wait(mon.is_ready, "become ready")
    out = {"restart_to_ready_s": round(time.perf_counter() - t0, 2), "restart_videos_held": mon.store.held}
    mon.stop_event.set()
    thread.join(60)
    return out
