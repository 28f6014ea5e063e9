"""TensorRT plans for Triton's production configs, built with ``trtexec`` where TensorRT exists."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from detectors.errors import TritonNotInstalled
from detectors.repository import list_detectors, repository_path
from detectors.serving.config import MAX_BATCH, config_pbtxt


def build_tensorrt(name: str, repo: str | Path | None = None, trtexec: str | None = None) -> Path:
    """Build ``<name>_trt/1/model.plan`` with ``trtexec`` (FP16, min/opt/max batch 1/8/16) and its config.

    A plan is tied to the GPU model and the TensorRT version that built it: build one per Triton release and
    GPU type, on that GPU. Raises :class:`TritonNotInstalled` with a plain message when trtexec is absent.
    """
    trtexec = trtexec or shutil.which("trtexec")
    if not trtexec:
        raise TritonNotInstalled(
            "TensorRT is not installed here (no `trtexec` on PATH): build the plan on a GPU "
            "machine with TensorRT, e.g. inside the NGC tritonserver image, for that GPU"
        )
    inst = list_detectors(repo)[name]
    s = inst.card.sampling
    dims = f"{s.frames}x{s.height}x{s.width}x3"
    folder = repository_path(repo) / f"{name}_trt"
    (folder / "1").mkdir(parents=True, exist_ok=True)
    plan = folder / "1" / "model.plan"
    inp = inst.card.input.name
    subprocess.run(
        [
            trtexec,
            f"--onnx={inst.model_path}",
            f"--saveEngine={plan}",
            "--fp16",
            f"--minShapes={inp}:1x{dims}",
            f"--optShapes={inp}:8x{dims}",
            f"--maxShapes={inp}:{MAX_BATCH}x{dims}",
        ],
        check=True,
    )
    config = config_pbtxt(inst.card, "production").replace('platform: "onnxruntime_onnx"', 'platform: "tensorrt_plan"')
    config = config.replace(f'name: "{name}"', f'name: "{name}_trt"').split("optimization {")[0]
    (folder / "config.pbtxt").write_text(config)
    return plan
