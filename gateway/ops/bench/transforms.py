"""``lastmile bench transforms``: per input and profile, the six-condition fan-out against its floor (CPU
seconds of the unavoidable steps, each an ffmpeg command), the cores it used, real time, peak RSS, and the
baselines (one ffmpeg CLI run per condition; `full` alone both ways). Every ratio is from measurements of one
run, each measurement in a fresh process (:mod:`gateway.ops.bench.measure`); targets are judged per row.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gateway.ops.bench.measure import cores, host, isolated, measure
from transforms import ffmpeg_cli
from transforms.engine import Engine
from transforms.spec import LASTMILE, PROFILES, Condition, Profile


def engine_job(data: bytes, conditions: tuple[Condition, ...], profile: Profile) -> dict[str, float]:
    """The fan-out's wall and CPU seconds, its passes over the frames (transforms.memory), and the MB of the
    variants it returns (held in memory: part of the peak that grows with duration by design)."""
    done = {}
    row = measure(lambda: done.setdefault("result", Engine(profile).run(data, conditions)))
    result = done["result"]
    row["passes"] = result.passes
    row["variants_mb"] = round(sum(len(v.data) for v in result.variants.values()) / 2**20, 1)
    return row


def cli_job(data: bytes, conditions: tuple[Condition, ...], profile: Profile) -> dict[str, float]:
    return measure(lambda: [ffmpeg_cli.run_condition(data, c, profile) for c in conditions])


def floor_job(path: str, conditions: tuple[Condition, ...], profile: Profile) -> dict:
    import tempfile

    from transforms.floor import measure_floor

    with tempfile.TemporaryDirectory(prefix="lastmile-floor-") as work:
        return measure_floor(Path(path), conditions, profile, Path(work))


def clip_seconds(data: bytes) -> float:
    """A benchmark input's duration from its header (the input limits do not apply to the benchmark's own clips)."""
    from transforms.limits import Limits
    from transforms.probe import probe

    return probe(data, Limits(max_duration_s=1e9, max_frames=1 << 40, max_bytes=1 << 40)).duration_s


def realtime_and_utilisation(fan: dict[str, float], duration_s: float) -> tuple[float, float]:
    """A fan-out's wall over the clip's duration, and its CPU seconds over wall x the cores it may use."""
    return round(fan["wall_s"] / duration_s, 3), round(fan["cpu_s"] / (fan["wall_s"] * cores()), 3)


def transforms_row(name: str, path: Path, pname: str, baselines: bool = True) -> dict[str, Any]:
    """One input under one profile: the fan-out, its floor, and (with ``baselines``) the naive ffmpeg runs
    and `full` alone both ways; every ratio from measurements of this one run."""
    data, profile = path.read_bytes(), PROFILES[pname]
    duration = clip_seconds(data)
    row: dict[str, Any] = {"input": name, "profile": pname, "duration_s": round(duration, 2)}
    row["fanout"] = fan = isolated(engine_job, data, LASTMILE, profile)
    row["floor"] = isolated(floor_job, str(path), LASTMILE, profile)
    row["fanout_cpu_vs_floor"] = round(fan["cpu_s"] / row["floor"]["cpu_s"], 3)
    row["realtime_factor"], row["fanout_core_utilisation"] = realtime_and_utilisation(fan, duration)
    row["peak_rss_mb"] = fan["peak_rss_mb"]
    row["peak_rss_less_variants_mb"] = round(fan["peak_rss_mb"] - fan["variants_mb"], 1)
    if baselines:
        perturbed = tuple(c for c in LASTMILE if c.steps)
        full = tuple(c for c in LASTMILE if c.name == "full")
        row["naive_ffmpeg"] = isolated(cli_job, data, perturbed, profile)
        row["full"] = isolated(engine_job, data, full, profile)
        row["full_ffmpeg_cli"] = isolated(cli_job, data, full, profile)
        row["fanout_vs_naive_ffmpeg"] = round(fan["wall_s"] / row["naive_ffmpeg"]["wall_s"], 3)
        row["full_vs_ffmpeg_cli"] = round(row["full"]["wall_s"] / row["full_ffmpeg_cli"]["wall_s"], 3)
    return row


def bench_transforms(inputs: dict[str, Path], profiles: list[str], long: dict[str, Path] | None = None) -> dict:
    """Per input and profile: the six-condition fan-out against its floor (CPU), the cores it used, real time,
    peak RSS, the naive one-ffmpeg-per-condition baseline and `full` alone both ways. ``long`` inputs get the
    throughput fan-out and floor, and the fidelity fan-out's RSS only. ``wall_s``: the whole run (clips made
    before it); with ``long`` inputs the target is 45 minutes on 2 cores."""
    started = time.perf_counter()
    results = [transforms_row(name, path, pname) for name, path in inputs.items() for pname in profiles]
    for name, path in (long or {}).items():
        results.append(transforms_row(name, path, "throughput", baselines=False))
        rss = isolated(engine_job, path.read_bytes(), LASTMILE, PROFILES["fidelity"])
        results.append(
            {
                "input": name,
                "profile": "fidelity",
                "fanout": rss,
                "peak_rss_mb": rss["peak_rss_mb"],
                "peak_rss_less_variants_mb": round(rss["peak_rss_mb"] - rss["variants_mb"], 1),
            }
        )
    checked = [r for r in results if "fanout_cpu_vs_floor" in r]
    wall = round(time.perf_counter() - started, 1)
    return {
        "benchmark": "transforms",
        "machine": host(),
        "wall_s": wall,
        "results": results,
        "targets": {
            "fanout_cpu_vs_floor <= 1.15": all(r["fanout_cpu_vs_floor"] <= 1.15 for r in checked),
            "fanout_core_utilisation >= 0.8": all(r["fanout_core_utilisation"] >= 0.8 for r in checked),
            "full_vs_ffmpeg_cli <= 1.15": all(r["full_vs_ffmpeg_cli"] <= 1.15 for r in results if "full" in r),
            "peak_rss_mb <= 1024": all(r["peak_rss_mb"] <= 1024 for r in results),
            **_realtime_targets(results),
            **_duration_targets(results),
            **({"whole run <= 45 min (with the 60 s inputs)": wall <= 45 * 60} if long else {}),
        },
        "note": "every ratio is per input and profile, from measurements of this one run; targets hold per row",
    }


def _realtime_targets(results: list[dict]) -> dict[str, bool]:
    """Real time at 720p30 on this machine: <= 1.0 with the throughput profile, <= 3.0 with fidelity."""
    bounds = {"throughput": 1.0, "fidelity": 3.0}
    out = {}
    for pname, bound in bounds.items():
        rows = [r for r in results if "720p30" in r["input"] and r["profile"] == pname and "realtime_factor" in r]
        if rows:
            out[f"realtime_factor <= {bound} (720p30, {pname})"] = all(r["realtime_factor"] <= bound for r in rows)
    return out


def _duration_targets(results: list[dict]) -> dict[str, bool]:
    """Peak RSS less the returned variants does not grow with duration: each 60 s 1080p30 row within 10% of
    the 10 s row of the same profile (the 60 s input loops the 10 s one)."""

    def rows(tag: str) -> dict[str, float]:
        return {r["profile"]: r["peak_rss_less_variants_mb"] for r in results if tag in r["input"]}

    short, long = rows("1080p30_10s"), rows("1080p30_60s")
    both = sorted(set(short) & set(long))
    if not both:
        return {}
    return {"peak RSS less variants, 60 s <= 1.1 x 10 s (1080p30)": all(long[p] <= 1.1 * short[p] for p in both)}
