"""The GPU check (``lastmile bench gpu``, run by ``scripts/gpu-check.sh``): what a machine with an NVIDIA GPU
does with the six-condition fan-out (NVENC H.264 tails) and with the detectors (onnxruntime's CUDA and
TensorRT execution providers: throughput, the scores' largest difference from the CPU's with TF32 on and off,
and how many nodes each provider ran, from onnxruntime's profiler).

Every part that the machine cannot run is skipped with its reason, never failed; each part writes its JSON as
soon as it ends, so a part cut off by a time limit loses only itself. The fan-out is measured twice on the
same machine in the same run, NVENC tails and libx264 tails, with everything else equal, so their ratio is the
GPU's effect; the floor (:mod:`transforms.floor`) is added where an ffmpeg CLI is present.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.ops.bench import detector_job
from gateway.ops.bench_transforms import clip_seconds, engine_job, floor_job, realtime_and_utilisation
from gateway.ops.measure import cores, isolated
from transforms.spec import LASTMILE, PROFILES

ORT_PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
}


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
    out["onnxruntime_providers"] = _ort_providers()
    reason = nvenc_unavailable_reason()
    out["nvenc"] = reason is None
    if reason:
        out["skipped"]["nvenc"] = reason
    out["ffmpeg_cli"] = _ffmpeg_cli()
    if out["ffmpeg_cli"] is None:
        out["skipped"]["ffmpeg_cli"] = "no ffmpeg CLI (imageio-ffmpeg's binary or one on PATH): floor rows skipped"
    return out


def _ort_providers() -> list[str]:
    try:
        import onnxruntime as ort
    except ImportError:
        return []
    return list(ort.get_available_providers())


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


def detectors(batch: int = 16, repeats: int = 20) -> dict[str, Any]:
    """Each detector on each onnxruntime execution provider present (TensorRT builds its engine in warm-up)."""
    from detectors.repository import list_detectors

    have = _ort_providers()
    out: dict[str, Any] = {"providers": have, "results": {}, "skipped": {}}
    for label, provider in ORT_PROVIDERS.items():
        if provider not in have:
            out["skipped"][label] = f"{provider} is not in this onnxruntime build ({have or 'no onnxruntime'})"
            continue
        for name, inst in list_detectors().items():
            try:
                run = isolated(
                    detector_job, str(inst.model_path), inst.card.model_dump_json(), batch, repeats, 0, [provider]
                )
            except Exception as exc:  # a provider that is listed but cannot load this model
                out["skipped"][f"{label}:{name}"] = repr(exc)[:300]
                continue
            out["results"].setdefault(label, {})[name] = run
            if label != "cpu":
                tf32s = (False, True) if label == "cuda" else (False,)  # TensorRT: one engine build is enough
                out.setdefault("parity", {}).setdefault(label, {})[name] = {
                    f"use_tf32={int(tf32)}": _parity(inst, label, tf32) for tf32 in tf32s
                }
    return out


def _parity(inst: Any, label: str, use_tf32: bool) -> dict[str, Any]:
    try:
        return isolated(parity_job, str(inst.model_path), inst.card.model_dump_json(), label, use_tf32)
    except Exception as exc:  # fail-closed placement (ProviderUnavailable) and the provider's own errors
        return {"failed": repr(exc)[:300]}


def parity_job(model_path: str, card_json: str, provider: str, use_tf32: bool, batch: int = 8) -> dict[str, Any]:
    """Scores of seeded random frames on ``provider`` (fail-closed: every node on the GPU) against the CPU's,
    and the nodes each provider ran (a profiled run that may fall back, to show where)."""
    import numpy as np

    from detectors.card import ModelCard
    from detectors.runtimes.embedded import EmbeddedRuntime
    from detectors.runtimes.providers import ProviderSettings

    card = ModelCard.model_validate_json(card_json)
    frames = np.random.default_rng(0).integers(0, 256, card.input_shape(batch), dtype=np.uint8)
    settings = ProviderSettings(provider=provider, use_tf32=use_tf32)
    placement = node_placement(model_path, card, settings, frames)
    cpu = EmbeddedRuntime(model_path, card, settings=ProviderSettings(provider="cpu")).score(frames)
    gpu = EmbeddedRuntime(model_path, card, settings=settings).score(frames)
    diff = np.abs(gpu - cpu)
    rel = diff / np.maximum(np.abs(cpu), 1e-12)
    return {"max_abs_diff": float(diff.max()), "max_rel_diff": float(rel.max()), "nodes_by_provider": placement}


def node_placement(model_path: str, card: Any, settings: Any, frames: Any) -> dict[str, int]:
    """How many of the graph's nodes each execution provider ran, from one run under onnxruntime's profiler."""
    import tempfile

    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        opts = ort.SessionOptions()
        opts.enable_profiling = True
        opts.profile_file_prefix = str(Path(tmp) / "profile")
        # a session that may split the graph with the CPU (the runtime never opens one), to show where nodes go
        session = ort.InferenceSession(model_path, opts, providers=settings.ort_providers(with_cpu=True))
        session.run([card.output.name], {card.input.name: frames})
        events = json.loads(Path(session.end_profiling()).read_text())
    nodes = {e["name"]: e["args"]["provider"] for e in events if e.get("cat") == "Node" and "provider" in e["args"]}
    counts: dict[str, int] = {}
    for provider in nodes.values():
        counts[provider] = counts.get(provider, 0) + 1
    return counts


def run_check(out_dir: Path, inputs: dict[str, Path]) -> dict[str, Any]:
    """All three parts; each written to ``out_dir`` as it ends (machine.json, transforms.json, detectors.json)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    found = _part(out_dir / "machine.json", machine)
    with_floor = bool(found.get("ffmpeg_cli"))
    parts: dict[str, Callable[[], dict[str, Any]]] = {
        "transforms": lambda: transforms(inputs, with_floor),
        "detectors": detectors,
    }
    report = {"machine": found}
    for name, fn in parts.items():
        report[name] = _part(out_dir / f"{name}.json", fn)
    return report


def _part(path: Path, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    try:
        result = fn()
    except Exception as exc:  # one part failing must not lose the others
        result = {"failed": repr(exc)[:1000]}
    path.write_text(json.dumps(result, indent=2))
    return result
