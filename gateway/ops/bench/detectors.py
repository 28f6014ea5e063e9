"""``lastmile bench detectors``: embedded-runtime throughput per detector (inference only: the frames are already
sampled), each batch size measured in a fresh spawned process (:func:`gateway.ops.bench.measure.isolated`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gateway.ops.bench.measure import host, isolated


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
        "machine": host(),
        "detectors": results,
    }
