"""``lastmile bench gateway``: videos/s and end-to-end latency through a real broker and gateway against the
in-process replay, on the same corpus, in one run."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gateway.ops.bench.measure import host


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
        "machine": host(),
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
