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
from gateway.ops.bench.measure import isolated
from gateway.ops.bench.monitor_jobs import first_monitor, restarted_monitor, wait
from gateway.toolkit import tansu
from transforms.spec import LASTMILE

DETECTORS = tuple(d.name for d in REFERENCE_DETECTORS)  # the shipped reference detectors
CONDITIONS = tuple(c.name for c in LASTMILE)  # the six LastMile conditions
PARTITIONS = 4
WINDOW_S = 3600.0  # every video produced is in the time window
LIVE_SHARE = 10  # a tenth more videos is loaded while the monitor is scraped
LOAD_PROPERTIES = {"linger.ms": 50, "batch.size": 1 << 20, "queue.buffering.max.messages": 1_000_000}


def _produce(kafka, videos: int, now: float, partitions: int, first: int = 0) -> int:
    """Score events of ``videos`` videos (as the gateway writes them, labelled) numbered from ``first``, event
    times spread over the 10 minutes before ``now``, video i on partition i mod ``partitions``, sent by the bus's
    producer in large batches (librdkafka); returns how many were acknowledged."""
    import orjson

    from gateway import bus
    from gateway.core.messages import ScoreEvent, idempotency_key

    template = ScoreEvent(
        video_id="x",
        condition="c",
        detector="d",
        detector_version="1",
        runtime="embedded",
        score=0.0,
        decision=False,
        threshold=0.0,
        label="real",
        event_time=now,
        idempotency_key="k",
    ).model_dump(mode="json")
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
                    fields = {
                        **template,
                        "video_id": vid,
                        "condition": cond,
                        "detector": det,
                        "score": s,
                        "decision": s > 0,
                        "label": ("real", "generated")[y],
                        "event_time": t,
                        "idempotency_key": idempotency_key(vid, cond, det, "1"),
                    }
                    yield i % partitions, key, orjson.dumps(fields)

    bulk = kafka.model_copy(update={"client": "librdkafka", "ack_timeout_s": 600.0, "properties": LOAD_PROPERTIES})
    producer, sent = bus.producer(bulk), 0
    try:
        for partition, key, value in records():
            producer.send(kafka.output_topic, value, key=key, partition=partition)
            sent += 1
        producer.flush()
    finally:
        producer.close()
    return sent


def _load_live(kafka, videos: int, first: int, partitions: int, go: Path) -> None:
    """Once ``go`` exists, load ``videos`` more videos' score events (numbered from ``first``, event times now)."""
    wait(go.exists, "ask for the live events")
    _produce(kafka, videos, time.time(), partitions, first)


def bench_monitor(videos: int = 100_000, partitions: int = PARTITIONS) -> dict[str, Any]:
    """The monitor end to end from a broker at ``videos`` held (see the module's docstring)."""
    from gateway import bus
    from gateway.monitor.config import CheckpointSettings, MonitorConfig, MonitorKafka, WindowSettings

    os.environ.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with tansu.start_broker() as broker, tempfile.TemporaryDirectory(prefix="lastmile-bench-monitor-") as tmp:
        kafka = MonitorKafka(
            bootstrap=broker.bootstrap, input_topic="bench.videos", output_topic="bench.scores", labels_topic=None
        )
        bus.ensure_topics(kafka, partitions=partitions)
        t0 = time.perf_counter()
        sent = _produce(kafka, videos, time.time(), partitions)
        produce_s = time.perf_counter() - t0
        windows = WindowSettings(
            seconds=WINDOW_S,
            max_videos=max(videos, 10),
            count=min(500, max(videos, 10)),
            compute_interval_s=WINDOW_S,
            stale_after_s=WINDOW_S,
        )
        # (no series may go stale while a large run ingests: its newest events are those it loaded first)
        ckpt = CheckpointSettings(directory=Path(tmp), interval_s=WINDOW_S)
        cfg = MonitorConfig(kafka=kafka, windows=windows, checkpoint=ckpt, http_port=0).model_dump_json()
        live = max(videos // LIVE_SHARE, 10)  # more videos, loaded while the first monitor is scraped
        go = Path(tmp) / "go"
        loader = threading.Thread(target=_load_live, args=(kafka, live, videos, partitions, go), daemon=True)
        loader.start()
        first = isolated(first_monitor, cfg, live * len(DETECTORS) * len(CONDITIONS), str(go))
        loader.join()
        restart = isolated(restarted_monitor, cfg)
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
