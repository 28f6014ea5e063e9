"""``lastmile bench monitor``: the monitor end to end from a broker, at a given number of videos held (the reference
detectors x the six LastMile conditions: 24 score events a video).

A local broker (Tansu) is filled with the score events first (not timed). Then a monitor, in its own process
pinned to one core (BLAS threads 1), rebuilds its windows from the topic (fetch, CRC, parse, de-duplicate,
store: the ingest rate), computes every windowed series once (the computation time), serves a scrape (the
scrape time) and writes a checkpoint. A second monitor process starts from that checkpoint and is timed until
/readyz would say ready: windows restored and one computation served (the restart-to-ready time). Peak RSS is
each process's own.
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


def _produce(kafka, videos: int, now: float, partitions: int) -> int:
    """Score events of ``videos`` videos (as the gateway writes them, labelled), event times spread over the
    last 10 minutes, video i on partition i mod ``partitions``, loaded in record batches
    (:mod:`gateway.bus.bulk`); returns how many were appended."""
    import orjson

    from gateway.bus.bulk import Loader
    from gateway.core.messages import ScoreEvent, idempotency_key

    template = ScoreEvent(video_id="x", condition="c", detector="d", detector_version="1", runtime="embedded",
                          score=0.0, decision=False, threshold=0.0, label="real", event_time=now,
                          idempotency_key="k").model_dump(mode="json")  # fmt: skip
    rng = np.random.default_rng(0)

    def records():
        for i in range(videos):
            vid, y, t = f"b{i}", i % 2, now - 600 + 600 * i / videos
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


def _one_core() -> None:
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def _wait(check, what: str) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the monitor did not {what}")
        time.sleep(0.01)  # the polling interval of a condition, not a synchronisation


def _first(cfg_json: str) -> dict[str, float]:
    """Rebuild from the topic, compute, scrape, checkpoint."""
    _one_core()
    from prometheus_client import generate_latest

    from gateway.monitor.config import MonitorConfig
    from gateway.monitor.service import Monitor

    mon = Monitor(MonitorConfig.model_validate_json(cfg_json))
    t0 = time.perf_counter()
    thread = threading.Thread(target=mon.run, daemon=True)
    thread.start()
    _wait(mon.caught_up.is_set, "catch up")
    ingest_s = time.perf_counter() - t0
    _wait(lambda: mon.metrics.windows.latest is not None, "compute")
    t1 = time.perf_counter()
    page = generate_latest(mon.metrics.registry)
    scrape_s = time.perf_counter() - t1
    t2 = time.perf_counter()
    mon.checkpoint()  # production is over: nothing is read meanwhile
    writer = mon.checkpoints._writer
    if writer is not None:
        writer.join()
    checkpoint_s = time.perf_counter() - t2
    events, samples = mon.store.events["added"], mon.metrics.windows.latest.samples
    with_auc = {(x.labels["detector"], x.labels["condition"]) for x in samples if x.name == "lastmile_auc"}
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
        "checkpoint_write_s": round(checkpoint_s, 2),
    }
    mon.stop_event.set()
    thread.join(60)
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
        first = isolated(_first, cfg)
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
