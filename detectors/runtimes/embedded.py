"""The embedded runtime: an onnxruntime session in the calling process."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from detectors.card import ModelCard
from detectors.errors import RuntimeUnavailable
from detectors.runtimes.base import RuntimeStats, score_in_batches


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
