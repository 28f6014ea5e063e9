"""``lastmile bench triton``: the pipeline's request shape through the local Triton (dynamic batching on) and the
embedded runtime, under closed-loop load at several concurrencies, in one run."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gateway.ops.bench.measure import host
from transforms.spec import LASTMILE


def _client(score: Callable[[Any], Any], frames: Any, stop: float, latencies: list[float], lock: Any) -> None:
    while time.perf_counter() < stop:
        t0 = time.perf_counter()
        score(frames)
        dt = time.perf_counter() - t0
        with lock:
            latencies.append(dt)


def _load_levels(
    make_score: Callable[[], Callable[[Any], Any]], frames: Any, levels: tuple[int, ...], seconds: float
) -> list[dict]:
    """Closed-loop load: ``c`` threads, each with its own scorer, scoring one video at a time for ``seconds``."""
    import threading

    import numpy as np

    rows = []
    for c in levels:
        latencies: list[float] = []
        lock = threading.Lock()
        scorers = [make_score() for _ in range(c)]
        stop = time.perf_counter() + seconds
        t0 = time.perf_counter()
        threads = [threading.Thread(target=_client, args=(s, frames, stop, latencies, lock)) for s in scorers]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
        lat = np.array(latencies)
        rows.append(
            {
                "concurrency": c,
                "videos_per_s": round(len(lat) / wall, 2),
                "latency_p50_ms": round(1000 * float(np.percentile(lat, 50)), 2),
                "latency_p99_ms": round(1000 * float(np.percentile(lat, 99)), 2),
            }
        )
    return rows


def bench_triton(
    detector: str = "npr", seconds: float = 4.0, levels: tuple[int, ...] = (1, 2, 4, 8), batch: int = len(LASTMILE)
) -> dict[str, Any]:
    """The pipeline's request shape (one video's ``batch`` condition variants in one call, as
    :func:`gateway.scoring.pipeline.score_batched` sends them) through the local Triton (dynamic batching on) and
    the embedded runtime.

    Each client thread stands for one gateway worker: embedded, it owns a single-threaded onnxruntime session
    (the gateway's setting); through Triton it owns a gRPC client, and the server runs one single-threaded
    session per instance (two instances, one per core here) and batches concurrent requests itself.
    """
    import numpy as np

    from detectors.repository import list_detectors
    from detectors.runtimes.embedded import EmbeddedRuntime
    from detectors.runtimes.triton import TritonRuntime
    from detectors.serving.local import LocalTriton

    inst = list_detectors()[detector]
    frames = np.random.default_rng(0).integers(0, 256, inst.card.input_shape(batch), dtype=np.uint8)
    emb = _load_levels(
        lambda: EmbeddedRuntime(inst.model_path, inst.card, intra_op_threads=1).score, frames, levels, seconds
    )
    with LocalTriton() as server:
        TritonRuntime(inst.card, server.url).score(frames)  # warm
        tri = _load_levels(lambda: TritonRuntime(inst.card, server.url).score, frames, levels, seconds)
    for row in emb + tri:
        row["videos_per_s"] = round(row["videos_per_s"] * batch, 2)  # requests/s -> videos/s
    at4 = next(i for i, r in enumerate(tri) if r["concurrency"] == 4)
    return {
        "benchmark": "triton",
        "detector": detector,
        "input": list(inst.card.input_shape(1)[1:]),
        "variants_per_request": batch,
        "request": f"{batch} variants per request: the pipeline's one call per (video, detector) over its conditions",
        "server": "tritonserver 2.51 from nvidia-pytriton, python backend running the ONNX file with onnxruntime (CPU)",
        "embedded": emb,
        "triton": tri,
        "triton_vs_embedded_throughput": round(tri[at4]["videos_per_s"] / emb[at4]["videos_per_s"], 3),
        "triton_vs_embedded_throughput_note": "at concurrency 4, videos/s ratio measured in this run",
        "machine": host(),
    }
