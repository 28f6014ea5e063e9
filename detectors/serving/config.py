"""Triton model configurations, generated from model cards.

Per detector: ``config.pbtxt`` (production: onnxruntime on GPU, dynamic batching with preferred sizes and a
queue policy, TensorRT FP16 with an engine cache, and the CUDA provider's options for the nodes TensorRT does
not take: TF32 off, a fixed cuDNN algorithm), ``configs/cpu.pbtxt`` (onnxruntime on CPU) and
``configs/local.pbtxt`` (the python backend running the same ``model.onnx``, for the Triton that
``pip install nvidia-pytriton`` ships; :class:`~detectors.serving.local.LocalTriton` stages its ``model.py``).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Protocol

from detectors.card import ModelCard
from detectors.repository import VERSIONS_DIR, Installed, list_detectors

MAX_BATCH = 16
PREFERRED_BATCHES = (4, 8, 16)
DTYPES = {"uint8": ("TYPE_UINT8", "UINT8"), "float32": ("TYPE_FP32", "FP32")}


class GpuSettings(Protocol):
    """The GPU settings a production config takes: :class:`detectors.runtimes.providers.ProviderSettings` (the
    embedded runtime's, same names and meanings) or :class:`ServingGpu` (not imported: runtimes import this)."""

    provider: str
    use_tf32: bool
    cudnn_conv_algo_search: str
    gpu_mem_limit: int | None
    trt_fp16: bool
    trt_engine_cache_path: str | None


@dataclass(frozen=True)
class ServingGpu:
    """The committed production configs' settings: TensorRT FP16 with an engine cache, then the CUDA provider with
    ProviderSettings' defaults (TF32 off, cuDNN's HEURISTIC engines)."""

    provider: str = "tensorrt"
    use_tf32: bool = False
    cudnn_conv_algo_search: str = "HEURISTIC"
    gpu_mem_limit: int | None = None
    trt_fp16: bool = True
    trt_engine_cache_path: str | None = "/models/.trt_cache"


PRODUCTION = ServingGpu()
TRT_WORKSPACE_BYTES = 1 << 30
CUDNN_SEARCH_CODES = {"EXHAUSTIVE": 0, "HEURISTIC": 1, "DEFAULT": 2}  # Triton's model-level parameter takes these


# -- model repository ----------------------------------------------------------------------------------------
def _io(card: ModelCard) -> str:
    s = card.sampling
    return (
        f'input [ {{ name: "{card.input.name}" data_type: {DTYPES[card.input.dtype][0]} '
        f"dims: [ {s.frames}, {s.height}, {s.width}, 3 ] }} ]\n"
        f'output [ {{ name: "{card.output.name}" data_type: TYPE_FP32 dims: [ 1 ] reshape: {{ shape: [ ] }} }} ]\n'
    )


def _batching(queue_us: int) -> str:
    return (
        "dynamic_batching {\n"
        f"  preferred_batch_size: [ {', '.join(map(str, PREFERRED_BATCHES))} ]\n"
        f"  max_queue_delay_microseconds: {queue_us}\n"
        "  default_queue_policy { timeout_action: REJECT default_timeout_microseconds: 10000000 "
        "allow_timeout_override: true max_queue_size: 512 }\n"
        "}\n"
    )


def _accelerators(gpu: GpuSettings) -> str:
    """``optimization``: TensorRT (where the settings ask for it), then the CUDA provider's options. Triton's
    onnxruntime backend passes a ``cuda`` accelerator's parameters to the CUDA provider as they are (so
    ``use_tf32``), but when the config has a ``parameters`` block it then resets ``cudnn_conv_algo_search`` and
    ``gpu_mem_limit`` from that block's own keys: those two are written there (:func:`_gpu_parameters`)."""
    out = "optimization { execution_accelerators { gpu_execution_accelerator: [ "
    if gpu.provider == "tensorrt":
        out += (
            "{\n"
            '  name: "tensorrt"\n'
            f'  parameters {{ key: "precision_mode" value: "{"FP16" if gpu.trt_fp16 else "FP32"}" }}\n'
            f'  parameters {{ key: "max_workspace_size_bytes" value: "{TRT_WORKSPACE_BYTES}" }}\n'
        )
        if gpu.trt_engine_cache_path:
            out += (
                '  parameters { key: "trt_engine_cache_enable" value: "1" }\n'
                f'  parameters {{ key: "trt_engine_cache_path" value: "{gpu.trt_engine_cache_path}" }}\n'
            )
        out += "}, "
    tf32 = "1" if gpu.use_tf32 else "0"
    return out + f'{{\n  name: "cuda"\n  parameters {{ key: "use_tf32" value: "{tf32}" }}\n}} ] }} }}\n'


def _gpu_parameters(gpu: GpuSettings) -> str:
    out = (
        f'parameters {{ key: "cudnn_conv_algo_search" '
        f'value: {{ string_value: "{CUDNN_SEARCH_CODES[gpu.cudnn_conv_algo_search]}" }} }}\n'
    )
    if gpu.gpu_mem_limit is not None:
        out += f'parameters {{ key: "gpu_mem_limit" value: {{ string_value: "{gpu.gpu_mem_limit}" }} }}\n'
    return out


def config_pbtxt(card: ModelCard, variant: str, gpu: GpuSettings | None = None) -> str:
    """One of ``production`` (GPU: onnxruntime with ``gpu``'s provider settings, by default :data:`PRODUCTION`,
    TensorRT FP16 then CUDA with TF32 off), ``cpu`` or ``local`` (python backend)."""
    head = f'name: "{card.name}"\n'
    if variant == "local":
        head += 'backend: "python"\n'
    else:
        head += 'platform: "onnxruntime_onnx"\n'
    head += f"max_batch_size: {MAX_BATCH}\n" + _io(card)
    kind = "KIND_GPU" if variant == "production" else "KIND_CPU"
    # the python backend runs one single-threaded onnxruntime session per instance: two instances use two cores
    count = 2 if variant == "local" else 1
    body = f"instance_group [ {{ kind: {kind} count: {count} }} ]\n" + _batching(
        2000 if variant == "production" else 500
    )
    params = f'parameters {{ key: "lastmile_card_version" value: {{ string_value: "{card.version}" }} }}\n'
    if variant == "production":
        gpu = gpu or PRODUCTION
        body += _accelerators(gpu)
        params += _gpu_parameters(gpu)
    return head + body + params


def python_model_source() -> str:
    """The python-backend ``model.py`` that wraps a ``model.onnx`` (staged by :class:`LocalTriton`)."""
    return resources.files("detectors").joinpath("data/triton_python_model.py").read_text()


def write_configs(inst: Installed) -> list[Path]:
    """Write one detector's Triton configs (production, cpu, local) beside its model; return their paths."""
    folder = inst.model_path.parent.parent
    (folder / "configs").mkdir(exist_ok=True)
    written = []
    for path, variant in (
        (folder / "config.pbtxt", "production"),
        (folder / "configs" / "cpu.pbtxt", "cpu"),
        (folder / "configs" / "local.pbtxt", "local"),
    ):
        path.write_text(config_pbtxt(inst.card, variant))
        written.append(path)
    return written


def write_repository(repo: str | Path | None = None, out: str | Path | None = None) -> list[Path]:
    """Without ``out``: write the Triton configs of every user detector beside its model (the shipped ones keep
    their committed configs). With ``out``: stage a complete Triton model repository there, the shipped
    detectors and the user's (a user detector of the same name wins), ready to mount in a Triton server."""
    if out is None:
        local = [inst for inst in list_detectors(repo).values() if inst.card.remote is None]
        return [p for inst in local if inst.origin == "user" for p in write_configs(inst)]
    written = []
    for name, inst in list_detectors(repo).items():
        if inst.card.remote is not None:  # served elsewhere
            continue
        target = Path(out) / name
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(inst.folder, target, ignore=shutil.ignore_patterns("__pycache__", "*.py", VERSIONS_DIR))
        staged = Installed(inst.card, target / "1" / inst.model_path.name, inst.origin)
        written += [target / "1" / inst.model_path.name, *write_configs(staged)]
    return written
