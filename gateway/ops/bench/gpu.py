"""The GPU check (``lastmile bench gpu``, run by ``scripts/gpu-check.sh``): what a machine with an NVIDIA GPU
does with the six-condition fan-out (NVENC H.264 tails) and with the detectors (onnxruntime's CPU, CUDA and
TensorRT execution providers: videos/s at the request shape, the largest batch and 64, with and without I/O
binding, the scores' largest difference from the CPU's with TF32 on and off, and how many nodes each provider
ran: :mod:`gateway.ops.bench.gpu_detectors`).

Every part that the machine cannot run is skipped with its reason, never failed; each part writes its JSON as
soon as it ends (the detectors part also after each detector on each provider), so a part cut off by a time
limit loses only itself and what it had not yet measured. The fan-out is measured twice on the
same machine in the same run, NVENC tails and libx264 tails, with everything else equal, so their ratio is the
GPU's effect; the floor (:mod:`transforms.floor`) is added where an ffmpeg CLI is present.

The GPU check's detector table: from the detectors part's JSON (:mod:`gateway.ops.bench.gpu_detectors`), per
detector the plain rows' videos/s on each provider and batch, each GPU provider's speed-up over the CPU at the same
batch (same machine, same run), its largest score difference from the CPU with the default settings and with TF32,
and whether its profiled run placed every node on the GPU. ``detectors.md`` beside ``detectors.json``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from detectors.runtimes.providers import GPU_NAMES
from gateway.ops.bench.gpu_detectors import detectors, ort_providers
from gateway.ops.bench.measure import cores, isolated
from gateway.ops.bench.transforms import clip_seconds, engine_job, floor_job, realtime_and_utilisation
from transforms.spec import LASTMILE, PROFILES


def machine() -> dict[str, Any]:
    """The GPU as nvidia-smi names it, onnxruntime's providers, NVENC in PyAV's FFmpeg, the ffmpeg CLI."""
    from transforms.codecs import nvenc_unavailable_reason

    out: dict[str, Any] = {"cpus": cores(), "skipped": {}}
    if shutil.which("nvidia-smi"):
        query = "name,memory.total,driver_version"
        answer = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True, text=True, timeout=60
        )
        out["gpu"] = answer.stdout.strip() or answer.stderr.strip()
    else:
        out["skipped"]["gpu"] = "nvidia-smi is not on PATH"
    out["onnxruntime_providers"] = ort_providers()
    reason = nvenc_unavailable_reason()
    out["nvenc"] = reason is None
    if reason:
        out["skipped"]["nvenc"] = reason
    out["ffmpeg_cli"] = _ffmpeg_cli()
    if out["ffmpeg_cli"] is None:
        out["skipped"]["ffmpeg_cli"] = "no ffmpeg CLI (imageio-ffmpeg's binary or one on PATH): floor rows skipped"
    return out


def _ffmpeg_cli() -> str | None:
    try:
        from transforms.ffmpeg_cli import ffmpeg_exe

        return ffmpeg_exe()
    except Exception:  # imageio-ffmpeg raises RuntimeError when it has no binary; ImportError without it
        return None


def transforms(inputs: dict[str, Path], with_floor: bool) -> dict[str, Any]:
    """Per input: the throughput fan-out with NVENC tails and with libx264 tails (same run), and fidelity."""
    from transforms.codecs import nvenc_unavailable_reason

    tails = {
        "nvenc": PROFILES["throughput"].model_copy(update={"h264_encoder": "h264_nvenc"}),
        "libx264": PROFILES["throughput"].model_copy(update={"h264_encoder": "libx264"}),
    }
    rows, skipped = [], {}
    if reason := nvenc_unavailable_reason():
        del tails["nvenc"]
        skipped["nvenc"] = f"{reason}: the throughput fan-out ran with libx264 tails only"
    for name, path in inputs.items():
        data = path.read_bytes()
        duration = clip_seconds(data)
        row: dict[str, Any] = {"input": name, "duration_s": round(duration, 2)}
        for label, profile in {**tails, "fidelity": PROFILES["fidelity"]}.items():
            fan = isolated(engine_job, data, LASTMILE, profile)
            fan["realtime_factor"], fan["core_utilisation"] = realtime_and_utilisation(fan, duration)
            row[f"fanout_{label}"] = fan
        if "nvenc" in tails:
            row["nvenc_vs_libx264_wall"] = round(row["fanout_nvenc"]["wall_s"] / row["fanout_libx264"]["wall_s"], 3)
        if with_floor:
            floor = isolated(floor_job, str(path), LASTMILE, tails["libx264"])
            row["floor_libx264"] = floor
            row["fanout_libx264_cpu_vs_floor"] = round(row["fanout_libx264"]["cpu_s"] / floor["cpu_s"], 3)
        rows.append(row)
    return {"results": rows, "skipped": skipped, "cpus": cores()}


PARTS = ("transforms", "detectors")  # after machine.json, which every run writes


def run_check(
    out_dir: Path,
    inputs: dict[str, Path],
    quick: bool = False,
    parts: Sequence[str] = PARTS,
) -> dict[str, Any]:
    """machine.json, then each of ``parts`` (transforms.json; detectors.json and its table detectors.md, both
    rewritten after each detector on each provider), each written to ``out_dir`` as it ends; ``quick``: shorter
    detector rows (a smoke run)."""
    if unknown := set(parts) - set(PARTS):
        raise ValueError(f"unknown parts {sorted(unknown)}; known: {list(PARTS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "detectors.md").unlink(missing_ok=True)  # never a table from an earlier run beside this one's JSON
    found = _part(out_dir / "machine.json", machine)
    with_floor = bool(found.get("ffmpeg_cli"))
    latest: dict[str, dict[str, Any]] = {}  # what a part reported before it failed (the detectors part reports)

    def detectors_progress(report: dict[str, Any]) -> None:
        latest["detectors"] = report
        _write(out_dir / "detectors.json", report)
        _write_table(out_dir / "detectors.md", report)

    jobs: dict[str, Callable[[], dict[str, Any]]] = {
        "transforms": lambda: transforms(inputs, with_floor),
        "detectors": lambda: detectors(quick=quick, on_progress=detectors_progress),
    }
    report = {"machine": found}
    for name in (p for p in PARTS if p in parts):
        report[name] = _part(out_dir / f"{name}.json", jobs[name], lambda name=name: latest.get(name, {}))
    if "detectors" in report:
        _write_table(out_dir / "detectors.md", report["detectors"])
    return report


def _part(path: Path, fn: Callable[[], dict[str, Any]], so_far: Callable[[], dict[str, Any]] = dict) -> dict[str, Any]:
    """``fn()``'s report written to ``path``; if it raises, what it had reported (``so_far()``) and why it failed."""
    try:
        result = fn()
    except Exception as exc:  # one part failing must not lose the others, nor what it measured before
        result = {**so_far(), "failed": repr(exc)[:1000]}
    _write(path, result)
    return result


def _write_table(path: Path, report: dict[str, Any]) -> None:
    if "results" in report:
        _replace(path, markdown(report))


def _write(path: Path, result: dict[str, Any]) -> None:
    _replace(path, json.dumps(result, indent=2))


def _replace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a time limit may kill the run in the middle of a write)."""
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(text)
    os.replace(tmp, path)


DEFAULT_PARITY = "use_tf32=0"  # the runtime's default settings (ProviderSettings.use_tf32 is False)
TF32_PARITY = "use_tf32=1"
LABELS = {"cpu": "CPU", "cuda": "CUDA", "tensorrt": "TensorRT"}
PLACED = {True: "yes", False: "no", None: "-"}  # every node on the GPU; None: no default-settings parity run


def plain_rates(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Videos/s by shape (``request``, ``max``, ``wide``) of the rows without I/O binding."""
    return {row["shape"]: row["videos_per_s"] for row in rows if not row["io_binding"]}


def summary(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per detector: ``videos_per_s[provider][shape]``, ``speedup[gpu provider][shape]`` (over the CPU),
    ``parity[gpu provider]`` (max abs diff on random frames per TF32 setting, or the failure), ``real_clips[gpu
    provider]`` (max abs diff on the real clips, default settings; None where not measured) and
    ``wholly_on_gpu[gpu provider]`` (None where the default-settings parity run failed or did not run)."""
    results, out = report.get("results", {}), {}
    names = dict.fromkeys(name for by_name in results.values() for name in by_name)  # CPU's order first
    for name in names:
        cpu = plain_rates(results.get("cpu", {}).get(name, []))
        entry: dict[str, Any] = {
            "videos_per_s": {"cpu": cpu},
            "speedup": {},
            "parity": {},
            "real_clips": {},
            "wholly_on_gpu": {},
        }
        for label, by_name in results.items():
            if label == "cpu" or name not in by_name:
                continue
            gpu = entry["videos_per_s"][label] = plain_rates(by_name[name])
            entry["speedup"][label] = {s: round(gpu[s] / cpu[s], 2) for s in gpu if cpu.get(s)}
            parity = report.get("parity", {}).get(label, {}).get(name, {})
            entry["parity"][label] = {k: v.get("max_abs_diff", v.get("failed")) for k, v in parity.items()}
            default = parity.get(DEFAULT_PARITY, {})
            entry["real_clips"][label] = default.get("real_clips", {}).get("max_abs_diff")
            nodes = default.get("nodes_by_provider")
            entry["wholly_on_gpu"][label] = None if nodes is None else bool(nodes) and set(nodes) <= GPU_NAMES
        out[name] = entry
    return out


def _rates(rates: dict[str, float], shapes: list[str]) -> str:
    return " / ".join(f"{rates[s]:,.0f}" if s in rates else "-" for s in shapes)


def _diff(value: Any) -> str:
    return f"{value:.1e}" if isinstance(value, float) else ("-" if value is None else "failed")


def markdown(report: dict[str, Any]) -> str:
    """The summary as a Markdown table, one line per detector and GPU provider (CPU alone where none ran)."""
    batches = report["batches"]
    shapes = list(batches)
    sizes = "/".join(f"b{batches[s]['batch']}" for s in shapes)
    widest = max(shapes, key=lambda s: batches[s]["batch"])
    columns = [
        "detector",
        "provider",
        f"CPU {sizes} (videos/s)",
        f"GPU {sizes}",
        f"GPU/CPU at b{batches[widest]['batch']}",
        "max abs diff vs CPU: random frames, default",
        "with TF32",
        "real clips, default",
        "every node on the GPU",
    ]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for name, entry in summary(report).items():
        cpu = _rates(entry["videos_per_s"]["cpu"], shapes)
        gpus = [label for label in entry["videos_per_s"] if label != "cpu"]
        if not gpus:
            lines.append(f"| {name} | CPU only | {cpu} |" + " - |" * (len(columns) - 3))
        for label in gpus:
            parity, speedup = entry["parity"][label], entry["speedup"][label].get(widest)
            cells = [
                name,
                LABELS[label],
                cpu,
                _rates(entry["videos_per_s"][label], shapes),
                f"{speedup:.2f}x" if speedup is not None else "-",
                _diff(parity.get(DEFAULT_PARITY)),
                _diff(parity.get(TF32_PARITY)),
                _diff(entry["real_clips"][label]),
                PLACED[entry["wholly_on_gpu"][label]],
            ]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
