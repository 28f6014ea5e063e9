"""The embedded runtime: an onnxruntime session in the calling process, on the execution provider its
:class:`~detectors.runtimes.providers.ProviderSettings` name (the CPU unless told otherwise; a GPU provider that
cannot run the whole graph fails start-up: :func:`~detectors.runtimes.providers.open_session`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from detectors.card import ModelCard
from detectors.errors import RuntimeUnavailable
from detectors.runtimes.base import RuntimeStats, score_in_batches
from detectors.runtimes.providers import ORT_NAMES, ProviderSettings, ProviderUnavailable, open_session

DEFAULT_MAX_BATCH = 16  # most videos in one onnxruntime call; make_runtime sets none, so the gateway's runtimes use it


def settings_for(providers: list[str] | None) -> ProviderSettings:
    """The settings that ask for the first of onnxruntime ``providers`` (names such as ``CUDAExecutionProvider``);
    the defaults (the CPU, or ``LASTMILE_ONNXRUNTIME__*``) for None."""
    if not providers:
        return ProviderSettings()
    short = {v: k for k, v in ORT_NAMES.items()}
    if providers[0] not in short:
        raise ProviderUnavailable(f"unknown onnxruntime provider {providers[0]!r}; known: {sorted(short)}")
    return ProviderSettings(provider=short[providers[0]])


class EmbeddedRuntime:
    """An onnxruntime session in this process, with micro-batching, warm-up and fixed intra-op threads."""

    name = "embedded"

    def __init__(
        self,
        model_path: str | Path,
        card: ModelCard,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        intra_op_threads: int = 1,
        providers: list[str] | None = None,
        settings: ProviderSettings | None = None,
        warmup: bool = True,
    ) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = intra_op_threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.settings = settings or settings_for(providers)
        try:
            self.session, self.placement = open_session(model_path, self.settings, opts, card.name)
        except ProviderUnavailable:
            raise
        except Exception as exc:  # onnxruntime raises untyped errors
            raise RuntimeUnavailable(f"cannot load {model_path}: {exc}") from exc
        self.card, self.model_path, self.max_batch = card, Path(model_path), max_batch
        self.providers = self.session.get_providers()
        self.stats = RuntimeStats()
        if warmup:
            self.session.run([card.output.name], {card.input.name: np.zeros(card.input_shape(1), card.input.dtype)})

    @property
    def provider(self) -> str:
        """Where this runtime scores, for provenance (:attr:`Placement.label`)."""
        return self.placement.label

    def score(self, frames: np.ndarray) -> np.ndarray:
        return score_in_batches(self.card, frames, self.max_batch, self._infer, self.stats)

    def _infer(self, chunk: np.ndarray) -> np.ndarray:
        (native,) = self.session.run([self.card.output.name], {self.card.input.name: chunk})
        return native
