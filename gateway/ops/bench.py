"""Benchmarks (``lastmile bench ...``): wall and CPU time, peak RSS, and ratios measured in one run.

Each measurement runs in a fresh spawned process (:mod:`gateway.ops.measure`), so its peak RSS is that of its
own process tree and no warm cache from another measurement helps it.
"""

from __future__ import annotations

import multiprocessing as mp
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.ops.measure import isolated
from transforms.spec import LASTMILE


def detector_job(model_path: str, card_json: str, batch: int, repeats: int, threads: int) -> dict[str, float]:
    import numpy as np

    from detectors.card import ModelCard
    from detectors.runtimes.embedded import EmbeddedRuntime

    card = ModelCard.model_validate_json(card_json)
    runtime = EmbeddedRuntime(model_path, card, max_batch=batch, intra_op_threads=threads)  # the CPU provider
    frames = np.random.default_rng(0).integers(0, 256, card.input_shape(batch), dtype=np.uint8)
    runtime.score(frames)  # warm
    t0 = time.perf_counter()
    for _ in range(repeats):
        runtime.score(frames)
    wall = time.perf_counter() - t0
    videos = batch * repeats
    return {
        "provider": runtime.providers[0],
        "batch": batch,
        "videos_per_s": round(videos / wall, 2),
        "frames_per_s": round(videos * card.sampling.frames / wall, 1),
        "latency_ms_per_batch": round(1000 * wall / repeats, 2),
    }


def bench_detectors(
    repo: Path | None, batches: tuple[int, ...] = (1, 16), seconds: float = 3.0, threads: int = 1
) -> dict[str, Any]:
    """Embedded-runtime throughput per detector (inference only: frames are already sampled)."""
    from detectors.repository import list_detectors

    results = {}
    for name, inst in list_detectors(repo).items():
        rows = []
        for batch in batches:
            probe = isolated(detector_job, str(inst.model_path), inst.card.model_dump_json(), batch, 2, threads)
            repeats = max(3, int(seconds * 1000 / max(probe["latency_ms_per_batch"], 1e-3)))
            rows.append(
                isolated(detector_job, str(inst.model_path), inst.card.model_dump_json(), batch, repeats, threads)
            )
        results[name] = {"input": list(inst.card.input_shape(1)[1:]), "runs": rows}
    return {
        "benchmark": "detectors",
        "runtime": "embedded onnxruntime (CPU)",
        "intra_op_threads": threads,
        "machine": {"cpus": mp.cpu_count(), "python": platform.python_version()},
        "detectors": results,
    }


def bench_gateway(workdir: Path, anchors: int = 10, workers: int = 2, profile: str = "throughput") -> dict[str, Any]:
    """Videos/s and end-to-end latency through a real broker and gateway vs the in-process replay, same corpus.

    Throughput is steady state, from the first result to the last (each path excludes its own start-up:
    spawning workers, and for Kafka the broker and the consumer-group joins), and also reported as wall time.
    Latency is per video, send to last score event: loaded (all sent at once, so it includes queueing) and
    unloaded (videos sent one at a time after a warm-up).
    """
    import numpy as np

    from detectors.proxy.corpus import CorpusConfig, synthesize
    from gateway.batch.kafka_replay import replay_via_kafka
    from gateway.batch.replay import ReplayConfig, replay
    from gateway.stream.service import Gateway

    manifest = synthesize(CorpusConfig(anchors=anchors, seed=777), workdir / "corpus")
    cfg = ReplayConfig(manifest=manifest, profile=profile)
    n = anchors * 6
    t0 = time.perf_counter()
    replay(cfg, workdir / "inproc", workers=workers, progress=False, chunk_size=1)
    inproc_wall = time.perf_counter() - t0
    done = [p.stat().st_mtime for p in (workdir / "inproc" / "parts").glob("part-*.parquet")]
    inproc_rate = steady_rate(done, n, inproc_wall)
    stats: dict = {}
    t0 = time.perf_counter()
    replay_via_kafka(cfg, workdir / "kafka", workers=workers, stats=stats, tap=Gateway)
    kafka_wall = time.perf_counter() - t0
    received = list(stats["received"].values())
    kafka_rate = steady_rate(received, n, kafka_wall)
    kafka_basis, inproc_basis = rate_basis(received), rate_basis(done)
    loaded = np.array([stats["received"][v] - stats["sent"][v] for v in stats["sent"]])
    single = _unloaded_latency(workdir, cfg, workers)
    return {
        "benchmark": "gateway",
        "corpus": f"proxy corpus, {anchors} anchors, {n} videos, 6 conditions x 4 detectors, profile {profile}",
        "workers": workers,
        "inproc": {
            "videos_per_s": round(inproc_rate, 3),
            "rate_basis": inproc_basis,
            "wall_s": round(inproc_wall, 2),
        },
        "kafka": {
            "videos_per_s": round(kafka_rate, 3),
            "rate_basis": kafka_basis,
            "wall_s": round(kafka_wall, 2),
            "groups": stats["groups"],  # 2 or more: its gateway was started again in a fresh group (kafka_replay)
            "restarts": stats["restarts"],  # why each fresh group was needed
            "latency_loaded_p50_s": round(float(np.percentile(loaded, 50)), 2),
            "latency_loaded_p99_s": round(float(np.percentile(loaded, 99)), 2),
            "latency_unloaded_p50_s": round(float(np.percentile(single, 50)), 3),
            "latency_unloaded_p99_s": round(float(np.percentile(single, 99)), 3),
        },
        "kafka_vs_inproc_throughput": like_ratio((kafka_rate, kafka_basis), (inproc_rate, inproc_basis)),
        "kafka_vs_inproc_wall": round(inproc_wall / kafka_wall, 3),
        "machine": {"cpus": mp.cpu_count(), "python": platform.python_version()},
    }


def steady_rate(finished: list[float], videos: int, wall_s: float) -> float:
    """Steady-state videos/s from the times its results came: ``(k - 1) / (t_last - t_first)`` over ``k`` results,
    which leaves out start-up. Where those times cannot span an interval (one result, or a clock as coarse as
    the run, e.g. file times at 1 s), ``videos / wall_s``, start-up included."""
    if wall_s <= 0 or videos < 1:
        raise ValueError(f"a rate needs videos and a wall time: {videos} videos in {wall_s} s")
    if rate_basis(finished) == "wall":
        return videos / wall_s
    return (len(finished) - 1) / (max(finished) - min(finished))


def like_ratio(a: tuple[float, str], b: tuple[float, str]) -> float | None:
    """``a``'s rate over ``b``'s, to 3 places, where both have the same basis (:func:`rate_basis`); else None: a
    steady rate over one with start-up in it would flatter the first."""
    return round(a[0] / b[0], 3) if a[1] == b[1] else None


def rate_basis(finished: list[float]) -> str:
    """What :func:`steady_rate` measures for these result times: ``"steady"`` (first to last result) where they
    span an interval, else ``"wall"`` (start-up included): two paths' rates compare only on the same basis."""
    return "steady" if len(finished) >= 2 and max(finished) > min(finished) else "wall"


def _unloaded_latency(workdir: Path, cfg: Any, workers: int, videos: int = 6) -> list[float]:
    from detectors.manifest import read_manifest
    from gateway.batch.kafka_replay import replay_via_kafka
    from gateway.core.sources import local_path
    from gateway.stream.service import Gateway

    rows = read_manifest(cfg.manifest)[: videos + 1]
    small = workdir / "unloaded.jsonl"
    base = cfg.manifest.resolve().parent
    absolute = [r.model_copy(update={"uri": str(local_path(r.uri, base))}) for r in rows]  # the gateway's rule
    small.write_text("".join(r.model_dump_json() + "\n" for r in absolute))
    stats: dict = {}
    replay_via_kafka(
        cfg.model_copy(update={"manifest": small}),
        workdir / "unloaded",
        workers=workers,
        stats=stats,
        sequential=True,
        tap=Gateway,
    )
    first = rows[0].video_id  # the warm-up video pays for starting the workers
    return [stats["received"][v] - stats["sent"][v] for v in stats["sent"] if v != first]


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
    :func:`gateway.core.pipeline.score_batched` sends them) through the local Triton (dynamic batching on) and
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
        "machine": {"cpus": mp.cpu_count(), "python": platform.python_version()},
    }
