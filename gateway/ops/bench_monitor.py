"""``lastmile bench monitor``: the monitor end to end from a broker, at a given number of videos held (the reference
detectors x the six LastMile conditions: 24 score events a video).

A local broker (Tansu) is filled with the score events first (not timed). Then a monitor, in its own process
pinned to one core (BLAS threads 1), rebuilds its windows from the topic (fetch, CRC, parse, de-duplicate,
store: the ingest rate), computes every windowed series once (the computation time) and serves a scrape (the
scrape time). Then the bench loads a tenth more videos while that monitor ingests them and is scraped back to
back (the scrape time while ingesting: the slowest and the median; the oldest videos are evicted, so it still
holds N), each in-process scrape followed by a GET of ``/metrics`` and of ``/healthz`` over HTTP from the same
process (what Prometheus and the kubelet see, the client's own work included), and it writes a checkpoint. A
second monitor process starts from that checkpoint and is timed until /readyz would say ready: windows restored
and one computation served (the restart-to-ready time). Peak RSS is each process's own; the run fails unless
every series got an AUC.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from detectors.reference.registry import REFERENCE_DETECTORS
from gateway.ops.measure import isolated
from transforms.spec import LASTMILE

DETECTORS = tuple(d.name for d in REFERENCE_DETECTORS)  # the shipped reference detectors
CONDITIONS = tuple(c.name for c in LASTMILE)  # the six LastMile conditions
PARTITIONS = 4
WINDOW_S = 3600.0  # every video produced is in the time window
READY_TIMEOUT_S = 3600.0
LIVE_SHARE = 10  # a tenth more videos is loaded while the monitor is scraped
SLOW_SCRAPE_S = 0.2  # issue 24's bound on one scrape while ingesting


def _produce(kafka, videos: int, now: float, partitions: int, first: int = 0) -> int:
    """Score events of ``videos`` videos (as the gateway writes them, labelled) numbered from ``first``, event
    times spread over the 10 minutes before ``now``, video i on partition i mod ``partitions``, loaded in record
    batches (:mod:`gateway.bus.bulk`); returns how many were appended."""
    import orjson

    from gateway.bus.bulk import Loader
    from gateway.core.messages import ScoreEvent, idempotency_key

    template = ScoreEvent(video_id="x", condition="c", detector="d", detector_version="1", runtime="embedded",
                          score=0.0, decision=False, threshold=0.0, label="real", event_time=now,
                          idempotency_key="k").model_dump(mode="json")  # fmt: skip
    rng = np.random.default_rng(0)

    def records():
        for i in range(first, first + videos):
            vid, y, t = f"b{i}", i % 2, now - 600 + 600 * (i - first) / videos
            key, scores = (
                vid.encode(),
                iter(rng.normal(1.0 if y else -1.0, size=len(DETECTORS) * len(CONDITIONS)).tolist()),
            )
            for det in DETECTORS:
                for cond in CONDITIONS:
                    s = next(scores)
                    fields = {**template, "video_id": vid, "condition": cond, "detector": det, "score": s,
                              "decision": s > 0, "label": ("real", "generated")[y], "event_time": t,
                              "idempotency_key": idempotency_key(vid, cond, det, "1")}  # fmt: skip
                    yield i % partitions, key, orjson.dumps(fields)

    with Loader(kafka.bootstrap.split(",")[0]) as loader:
        return loader.load(kafka.output_topic, records(), int(now * 1000))


def _load_live(kafka, videos: int, first: int, partitions: int, go: Path) -> None:
    """Once ``go`` exists, load ``videos`` more videos' score events (numbered from ``first``, event times now)."""
    _wait(go.exists, "ask for the live events")
    _produce(kafka, videos, time.time(), partitions, first)


def _one_core() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def _wait(check, what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the monitor did not {what}")
        time.sleep(0.01)  # the polling interval of a condition, not a synchronisation


def _first(cfg_json: str, live_events: int, go: str) -> dict[str, float]:
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
    _wait(mon.caught_up.is_set, "catch up")
    ingest_s, events = time.perf_counter() - t0, mon.store.events["added"]
    _wait(lambda: mon.metrics.windows.latest is not None, "compute")
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
    import urllib.request

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


def _restart(cfg_json: str) -> dict[str, float]:
    """From the checkpoint to ready (windows restored, the tail read, one computation served)."""
    _one_core()
    from gateway.monitor.config import MonitorConfig
    from gateway.monitor.service import Monitor

    t0 = time.perf_counter()
    mon = Monitor(MonitorConfig.model_validate_json(cfg_json))
    thread = threading.Thread(target=mon.run, daemon=True)
    thread.start()
    _wait(mon.is_ready, "become ready")
    out = {"restart_to_ready_s": round(time.perf_counter() - t0, 2), "restart_videos_held": mon.store.held}
    mon.stop_event.set()
    thread.join(60)
    return out


def bench_monitor(videos: int = 100_000, partitions: int = PARTITIONS) -> dict[str, Any]:
    """The monitor end to end from a broker at ``videos`` held (see the module's docstring)."""
    from gateway import bus
    from gateway.monitor.config import CheckpointSettings, MonitorConfig, MonitorKafka, WindowSettings

    os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with bus.start_broker() as broker, tempfile.TemporaryDirectory(prefix="lastmile-bench-monitor-") as tmp:
        kafka = MonitorKafka(bootstrap=broker.bootstrap, input_topic="bench.videos", output_topic="bench.scores",
                             labels_topic=None)  # fmt: skip
        bus.ensure_topics(kafka, partitions=partitions)
        t0 = time.perf_counter()
        sent = _produce(kafka, videos, time.time(), partitions)
        produce_s = time.perf_counter() - t0
        windows = WindowSettings(seconds=WINDOW_S, max_videos=max(videos, 10), count=min(500, max(videos, 10)),
                                 compute_interval_s=WINDOW_S, stale_after_s=WINDOW_S)  # fmt: skip
        # (no series may go stale while a large run ingests: its newest events are those it loaded first)
        ckpt = CheckpointSettings(directory=Path(tmp), interval_s=WINDOW_S)
        cfg = MonitorConfig(kafka=kafka, windows=windows, checkpoint=ckpt, http_port=0).model_dump_json()
        live = max(videos // LIVE_SHARE, 10)  # more videos, loaded while the first monitor is scraped
        go = Path(tmp) / "go"
        loader = threading.Thread(target=_load_live, args=(kafka, live, videos, partitions, go), daemon=True)
        loader.start()
        first = isolated(_first, cfg, live * len(DETECTORS) * len(CONDITIONS), str(go))
        loader.join()
        restart = isolated(_restart, cfg)
    if first["series_with_auc"] != len(DETECTORS) * len(CONDITIONS):  # a computation of nothing is no measure
        raise RuntimeError(f"the monitor computed an AUC for {first['series_with_auc']} series, not every one")
    return {
        "videos": videos,
        "detectors": len(DETECTORS),
        "conditions": len(CONDITIONS),
        "partitions": partitions,
        "cores": 1,
        "events_produced": sent,
        "produce_s": round(produce_s, 1),
        **first,
        "restart_to_ready_s": restart["restart_to_ready_s"],
        "restart_videos_held": restart["restart_videos_held"],
        "restart_peak_rss_mb": restart["peak_rss_mb"],
    }
