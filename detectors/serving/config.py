"""Triton model configurations, generated from model cards.

Per detector: ``config.pbtxt`` (production: onnxruntime on GPU, dynamic batching with preferred sizes and a
queue policy, TensorRT FP16 with an engine cache), ``configs/cpu.pbtxt`` (onnxruntime on CPU) and
``configs/local.pbtxt`` (the python backend running the same ``model.onnx``, for the Triton that
``pip install nvidia-pytriton`` ships; :class:`~detectors.serving.local.LocalTriton` stages its ``model.py``).
"""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from detectors.card import ModelCard
from detectors.repository import Installed, list_detectors

MAX_BATCH = 16
PREFERRED_BATCHES = (4, 8, 16)
DTYPES = {"uint8": ("TYPE_UINT8", "UINT8"), "float32": ("TYPE_FP32", "FP32")}


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


def config_pbtxt(card: ModelCard, variant: str) -> str:
    """One of ``production`` (GPU, onnxruntime + TensorRT FP16), ``cpu`` or ``local`` (python backend)."""
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
    if variant == "production":
        body += (
            "optimization { execution_accelerators { gpu_execution_accelerator: [ {\n"
            '  name: "tensorrt"\n'
            '  parameters { key: "precision_mode" value: "FP16" }\n'
            '  parameters { key: "max_workspace_size_bytes" value: "1073741824" }\n'
            '  parameters { key: "trt_engine_cache_enable" value: "1" }\n'
            '  parameters { key: "trt_engine_cache_path" value: "/models/.trt_cache" }\n'
            "} ] } }\n"
        )
    params = f'parameters {{ key: "lastmile_card_version" value: {{ string_value: "{card.version}" }} }}\n'
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
        shutil.copytree(inst.folder, target, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
        staged = Installed(inst.card, target / "1" / inst.model_path.name, inst.origin)
        written += [target / "1" / inst.model_path.name, *write_configs(staged)]
    return written
