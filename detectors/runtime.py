"""Runtimes that score sampled frames: one interface, embedded onnxruntime here, Triton elsewhere.

``score(frames) -> scores``: ``frames`` is ``[N, T, H, W, 3]`` as the model card asks; ``scores`` is ``[N]``
float64 in the gateway's convention (higher = more likely generated; the card's direction is applied).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from detectors.card import ModelCard
from detectors.errors import BadRequest, RuntimeUnavailable


@runtime_checkable
class Runtime(Protocol):
    card: ModelCard
    name: str  # "embedded" | "triton"

    def score(self, frames: np.ndarray) -> np.ndarray: ...


@dataclass
class RuntimeStats:
    """Counters a runtime exposes (for benchmarks and /metrics)."""

    batches: int = 0
    videos: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)


def check_frames(card: ModelCard, frames: np.ndarray) -> None:
    """Raise :class:`BadRequest` unless ``frames`` is a batch the card's model accepts."""
    want = card.input_shape(frames.shape[0] if frames.ndim == 5 else 1)
    if frames.ndim != 5 or tuple(frames.shape[1:]) != want[1:]:
        raise BadRequest(
            f"{card.name}: frames of shape {frames.shape}, the card asks for [N, {', '.join(map(str, want[1:]))}]"
        )
    if frames.dtype != np.dtype(card.input.dtype):
        raise BadRequest(f"{card.name}: frames of dtype {frames.dtype}, the card asks for {card.input.dtype}")


def available_providers(prefer_gpu: bool = True) -> list[str]:
    """onnxruntime execution providers, best first: TensorRT and CUDA when present (extra ``gpu``), then CPU."""
    import onnxruntime as ort

    have = ort.get_available_providers()
    wanted = ["TensorrtExecutionProvider", "CUDAExecutionProvider"] if prefer_gpu else []
    return [p for p in wanted if p in have] + ["CPUExecutionProvider"]


class EmbeddedRuntime:
    """An onnxruntime session in this process, with micro-batching, warm-up and fixed intra-op threads."""

    name = "embedded"

    def __init__(
        self,
        model_path: str | Path,
        card: ModelCard,
        *,
        max_batch: int = 16,
        intra_op_threads: int = 1,
        providers: list[str] | None = None,
        warmup: bool = True,
    ) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = intra_op_threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            self.session = ort.InferenceSession(str(model_path), opts, providers=providers or available_providers())
        except Exception as exc:  # onnxruntime raises untyped errors
            raise RuntimeUnavailable(f"cannot load {model_path}: {exc}") from exc
        self.card, self.model_path, self.max_batch = card, Path(model_path), max_batch
        self.providers = self.session.get_providers()
        self.stats = RuntimeStats()
        if warmup:
            self.session.run([card.output.name], {card.input.name: np.zeros(card.input_shape(1), card.input.dtype)})

    def score(self, frames: np.ndarray) -> np.ndarray:
        return score_in_batches(self.card, frames, self.max_batch, self._infer, self.stats)

    def _infer(self, chunk: np.ndarray) -> np.ndarray:
        (native,) = self.session.run([self.card.output.name], {self.card.input.name: chunk})
        return native


def score_in_batches(
    card: ModelCard, frames: np.ndarray, max_batch: int, infer: Callable[[np.ndarray], np.ndarray], stats: RuntimeStats
) -> np.ndarray:
    """Check ``frames`` against the card, run ``infer`` on chunks of at most ``max_batch`` videos, record the
    latencies, and return generated-scores (the card's direction applied): the loop every runtime shares."""
    check_frames(card, frames)
    out = []
    for start in range(0, len(frames), max_batch):
        chunk = np.ascontiguousarray(frames[start : start + max_batch])
        t0 = time.perf_counter()
        native = infer(chunk)
        dt = time.perf_counter() - t0
        stats.batches += 1
        stats.videos += len(chunk)
        stats.seconds += dt
        stats.latencies.append(dt)
        out.append(card.generated_score(native))
    return np.concatenate(out) if out else np.zeros(0)
