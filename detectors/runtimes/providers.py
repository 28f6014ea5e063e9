"""onnxruntime execution providers for the embedded runtime: which one, with which options, and the fail-closed
check that a session asked for a GPU provider really runs the graph there.

The default is the CPU (nothing changes for a machine without a GPU). Asked for ``cuda`` or ``tensorrt``, a
session must place every node on it (TensorRT may hand nodes to CUDA: both are on the GPU); when it does not,
because onnxruntime lacks the provider, its CUDA libraries did not load, or a node has no GPU kernel, start-up
fails with :class:`ProviderUnavailable`, one line naming the provider and why, unless ``allow_cpu_fallback``
is set: then it runs on the CPU, logs a warning and says so in every score's provenance.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from detectors.errors import DetectorError
from transforms.support.config_errors import ConfigError, one_line

log = logging.getLogger("lastmile.runtime")

ORT_NAMES = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider"}
GPU_NAMES = frozenset({ORT_NAMES["cuda"], ORT_NAMES["tensorrt"]})
DISABLE_CPU_FALLBACK = "session.disable_cpu_ep_fallback"  # onnxruntime's session config key
# onnxruntime's Python session retries a failed creation with other providers ([CUDA, CPU] after TensorRT, else
# the CPU) unless told not to; older releases ignore the keyword, and then the first error is the retry's cause
ORT_NO_RETRY = 0
ENV_PREFIX = "LASTMILE_ONNXRUNTIME__"  # the same names as the gateway config's nested ``onnxruntime.*`` variables


class ProviderUnavailable(DetectorError, ConfigError):
    """A GPU provider was asked for and the session does not run the graph on it. Not transient (never retried):
    the machine or the configuration must change. A :class:`ConfigError`, so the CLI prints it as one line."""


class ProviderSettings(BaseSettings):
    """The embedded runtime's onnxruntime execution provider and its options (``onnxruntime:`` in a gateway
    config; ``LASTMILE_ONNXRUNTIME__PROVIDER=cuda`` and so on in the environment, also for ``lastmile replay``)."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid")
    provider: Literal["cpu", "cuda", "tensorrt"] = Field(
        "cpu", description="cpu, cuda (onnxruntime's CUDA provider) or tensorrt (TensorRT, with CUDA for the rest)"
    )
    device_id: int = Field(0, ge=0, description="the GPU's index")
    allow_cpu_fallback: bool = Field(
        False, description="false: a GPU provider that cannot run the whole graph fails start-up; true: run on CPU"
    )
    use_tf32: bool = Field(
        False, description="TF32 tensor cores in CUDA MatMul/Conv: faster, ~1e-3 relative error (off: FP32 parity)"
    )
    gpu_mem_limit: int | None = Field(None, ge=1, description="bytes the CUDA memory arena may hold; none: no limit")
    cudnn_conv_algo_search: Literal["EXHAUSTIVE", "HEURISTIC", "DEFAULT"] = Field(
        "HEURISTIC",
        description="cuDNN convolution engines: HEURISTIC (cuDNN's heuristic: untimed, so the same in every "
        "process on one GPU and cuDNN), EXHAUSTIVE (onnxruntime's default), or DEFAULT (cuDNN's fallback engines: "
        "slow, and onnxruntime warns for every Conv)",
    )
    trt_fp16: bool = Field(False, description="TensorRT may compute in FP16 (off: FP32, for parity with the CPU)")
    trt_engine_cache_path: str | None = Field(None, description="cache TensorRT engines in this folder")

    @property
    def ort_name(self) -> str:
        return ORT_NAMES[self.provider]

    @property
    def on_gpu(self) -> bool:
        return self.provider != "cpu"

    def cuda_options(self) -> dict[str, str]:
        """The CUDA provider's options, as onnxruntime (and Triton's ``cuda`` accelerator) spell them."""
        opts = {
            "device_id": str(self.device_id),
            "use_tf32": "1" if self.use_tf32 else "0",
            "cudnn_conv_algo_search": self.cudnn_conv_algo_search,
        }
        if self.gpu_mem_limit is not None:
            opts["gpu_mem_limit"] = str(self.gpu_mem_limit)
        return opts

    def tensorrt_options(self) -> dict[str, str]:
        opts = {"device_id": str(self.device_id), "trt_fp16_enable": "1" if self.trt_fp16 else "0"}
        if self.trt_engine_cache_path:
            opts.update(trt_engine_cache_enable="1", trt_engine_cache_path=self.trt_engine_cache_path)
        return opts

    def ort_providers(self, with_cpu: bool | None = None) -> list[tuple[str, dict[str, str]]]:
        """``providers=`` for ``onnxruntime.InferenceSession``, best first; the CPU last where ``with_cpu`` (default:
        on the CPU, or where fallback is allowed) lets it take nodes."""
        chain = {
            "cpu": [],
            "cuda": [(ORT_NAMES["cuda"], self.cuda_options())],
            "tensorrt": [(ORT_NAMES["tensorrt"], self.tensorrt_options()), (ORT_NAMES["cuda"], self.cuda_options())],
        }[self.provider]
        cpu = (not self.on_gpu or self.allow_cpu_fallback) if with_cpu is None else with_cpu
        return chain + ([(ORT_NAMES["cpu"], {})] if cpu else [])


@dataclass(frozen=True)
class Placement:
    """Where a session runs: the provider it runs on, and, when it fell back to the CPU, why."""

    provider: str  # onnxruntime's name of the first (main) provider of the session
    device_id: int | None = None
    fallback_reason: str | None = None

    @property
    def label(self) -> str:
        """One short string for provenance: ``CUDAExecutionProvider:0``, ``CPUExecutionProvider``, or
        ``CPUExecutionProvider (fallback: ...)``."""
        where = f"{self.provider}:{self.device_id}" if self.device_id is not None else self.provider
        return f"{where} (fallback: {self.fallback_reason})" if self.fallback_reason else where


def unavailable_reason(settings: ProviderSettings) -> str | None:
    """Why this onnxruntime cannot offer the asked-for provider at all (None: it lists it)."""
    import onnxruntime as ort

    have = ort.get_available_providers()
    if settings.ort_name in have:
        return None
    return (
        f"{settings.ort_name} is not in this onnxruntime {ort.__version__} (providers: {', '.join(have)}); "
        "install the extra 'gpu' (onnxruntime-gpu) in place of onnxruntime: see docs/gpu.md"
    )


def open_session(
    model: str | Path | bytes, settings: ProviderSettings, options: Any, who: str
) -> tuple[Any, Placement]:
    """An ``onnxruntime.InferenceSession`` for ``model`` on ``settings``' provider, and where it runs.

    Raises :class:`ProviderUnavailable` (one line, naming ``who`` and the provider) when a GPU provider was asked
    for and the session would not run the whole graph on it, unless ``settings.allow_cpu_fallback``; then the
    session is a CPU one, and a warning is logged."""
    import onnxruntime as ort

    source = model if isinstance(model, bytes) else str(model)
    if not settings.on_gpu:
        return ort.InferenceSession(source, options, providers=[ORT_NAMES["cpu"]]), Placement(ORT_NAMES["cpu"])
    reason = unavailable_reason(settings)
    if reason is None:  # the whole graph on the GPU, or no session: never a graph split silently with the CPU
        options.add_session_config_entry(DISABLE_CPU_FALLBACK, "1")
        try:
            session = ort.InferenceSession(
                source, options, providers=settings.ort_providers(with_cpu=False), enable_fallback=ORT_NO_RETRY
            )
        except Exception as exc:  # onnxruntime raises untyped errors (Fail, RuntimeException, ...)
            reason = f"{settings.ort_name} cannot run this graph: {one_line(exc.__cause__ or exc)}"
        else:
            active = session.get_providers()
            if active and active[0] == settings.ort_name:
                return session, Placement(settings.ort_name, settings.device_id)
            reason = (
                f"{settings.ort_name} did not load (session providers: {', '.join(active)}): its CUDA/cuDNN "
                "libraries are missing or the GPU is not visible; see docs/gpu.md"
            )
    if not settings.allow_cpu_fallback:
        raise ProviderUnavailable(f"{who}: {reason} (allow_cpu_fallback is false)")
    log.warning("%s: running on CPUExecutionProvider instead: %s", who, reason)
    options.add_session_config_entry(DISABLE_CPU_FALLBACK, "0")  # a CPU session conflicts with the entry
    session = ort.InferenceSession(source, options, providers=[ORT_NAMES["cpu"]])
    return session, Placement(ORT_NAMES["cpu"], fallback_reason=f"{settings.ort_name} unavailable")


def check_placement(models: dict[str, Path], settings: ProviderSettings) -> dict[str, Placement]:
    """Open (and close) a session per model on ``settings``' provider: the start-up check a process runs before
    it starts workers, so a GPU that cannot run a graph fails the start, not each worker. Nothing for the CPU."""
    import onnxruntime as ort

    if not settings.on_gpu:
        return {name: Placement(ORT_NAMES["cpu"]) for name in models}
    return {name: open_session(path, settings, ort.SessionOptions(), name)[1] for name, path in models.items()}
