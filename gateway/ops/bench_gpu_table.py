"""The GPU check's detector table: from the detectors part's JSON (:mod:`gateway.ops.bench_gpu_detectors`), per
detector the plain rows' videos/s on each provider and batch, each GPU provider's speed-up over the CPU at the same
batch (same machine, same run), its largest score difference from the CPU with the default settings and with TF32,
and whether its profiled run placed every node on the GPU. ``detectors.md`` beside ``detectors.json``."""

from __future__ import annotations

from typing import Any

from detectors.runtimes.providers import GPU_NAMES

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
