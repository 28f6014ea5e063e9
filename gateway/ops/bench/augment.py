"""``lastmile bench augment``: one augmentation worker against the encoder floor of the conditions it drew, per input.

The worker is what a ``DataLoader`` worker runs: for each draw key ``(seed, index, 0)`` the drawn condition's
variant and its frames as a detector card samples them, in a fresh process (CPU seconds and the peak resident memory
of its tree, :mod:`gateway.ops.bench.measure`). The floor is, for every draw, its condition's unavoidable steps, each
an ffmpeg command with the same encoder settings (:mod:`transforms.floor`), and one decode of the variant it wrote
(frames cannot come from a video without decoding it); ``original`` is one decode of the source. Each distinct
condition's floor is measured once in this run and counted once per draw of it.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from gateway.ops.bench.measure import host, isolated, measure
from transforms.augment import AugmentConfig, Augmenter
from transforms.sampling import SamplingPolicy

# the bound on one worker's peak resident memory (its process tree), as the transforms benchmark's
PEAK_RSS_MB = 1024


def worker_job(path: str, config: AugmentConfig, seed: int, draws: int, sampling: SamplingPolicy) -> dict[str, float]:
    """``draws`` items of one clip, as one augmentation worker makes them (in this process: its own codecs)."""
    augmenter = Augmenter(config, seed)
    data = Path(path).read_bytes()
    return measure(lambda: [augmenter.frames(data, i, 0, sampling) for i in range(draws)])


def floor_job(path: str, config: AugmentConfig, condition: str, work: str) -> dict:
    """The floor of one draw of ``condition``: its steps' ffmpeg commands (the source's decode first), then a decode
    of the variant they make (none for ``original``: its frames are the source's)."""
    import ffmpeg

    from transforms.engine import Engine
    from transforms.ffmpeg_graph import compile_command
    from transforms.floor import FloorStep, measure_floor, run_step

    augmenter = Augmenter(config)
    cond = next(c for c in augmenter.conditions if c.name == condition)
    src, folder = Path(path), Path(work)
    floor = measure_floor(src, [cond], augmenter.profile, folder)
    if cond.steps:
        variant = folder / "variant.mp4"
        variant.write_bytes(
            Engine(augmenter.profile, concurrent=False).run(src.read_bytes(), [cond]).variants[condition].data
        )
        cpu = run_step(
            FloorStep("decode variant", compile_command(ffmpeg.input(str(variant)).output("-", format="null")))
        )
        floor["steps"]["decode variant"] = round(cpu, 3)
        floor["cpu_s"] = round(floor["cpu_s"] + cpu, 3)
    return floor


def augment_row(name: str, path: Path, config: AugmentConfig, seed: int, draws: int, sampling: SamplingPolicy) -> dict:
    """One input: the worker's CPU seconds and peak memory over ``draws`` items, against the sum of their floors."""
    augmenter = Augmenter(config, seed)
    drawn = Counter(augmenter.draw(i, 0).condition.name for i in range(draws))
    worker = isolated(worker_job, str(path), config, seed, draws, sampling)
    floors = {}
    for condition in drawn:
        with tempfile.TemporaryDirectory(prefix="lastmile-augment-floor-") as work:
            floors[condition] = isolated(floor_job, str(path), config, condition, work)
    floor_cpu = sum(floors[c]["cpu_s"] * n for c, n in drawn.items())
    return {
        "input": name,
        "draws": draws,
        "drawn": dict(drawn),
        "worker": worker,
        "floor": {"cpu_s": round(floor_cpu, 3), "per_condition": floors},
        "worker_cpu_vs_floor": round(worker["cpu_s"] / floor_cpu, 3),
        "peak_rss_mb": worker["peak_rss_mb"],
    }


def bench_augment(
    inputs: dict[str, Path], config: AugmentConfig, seed: int, draws: int, sampling: SamplingPolicy
) -> dict:
    """Per input: one augmentation worker's CPU against the floor of the conditions it drew, and its peak memory."""
    started = time.perf_counter()
    results: list[dict[str, Any]] = [augment_row(n, p, config, seed, draws, sampling) for n, p in inputs.items()]
    return {
        "benchmark": "augment",
        "machine": host(),
        "wall_s": round(time.perf_counter() - started, 1),
        "profile": Augmenter(config).profile.model_dump(),
        "sampling": sampling.model_dump(),
        "seed": seed,
        "results": results,
        "targets": {
            "worker_cpu_vs_floor <= 1.15": all(r["worker_cpu_vs_floor"] <= 1.15 for r in results),
            f"peak_rss_mb <= {PEAK_RSS_MB}": all(r["peak_rss_mb"] <= PEAK_RSS_MB for r in results),
        },
        "note": "every ratio is per input, from measurements of this one run; targets hold per row",
    }
