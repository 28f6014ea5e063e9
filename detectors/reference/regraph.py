"""Rewrite a built reference graph in its GPU form from its own weights: no retraining, so the threshold in its
card stays valid. The first forms of ``spectral`` (ONNX ``DFT``, a ``ScatterElements`` add) and ``restrav_px``
(ONNX ``Acos``) have operators without CUDA kernels; the committed graphs were rewritten with :func:`rewrite`
and both forms checked against each other on real clips (``tests/test_gpu_placement.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

from detectors.reference import restrav, spectral
from transforms.sampling import SamplingPolicy

# name -> (sampling, weights of a built graph, the GPU-form graph from them)
REWRITES: dict[str, tuple[SamplingPolicy, Callable, Callable[..., onnx.ModelProto]]] = {
    spectral.NAME: (spectral.SAMPLING, spectral.params_from_onnx, spectral.build_onnx),
    restrav.NAME: (restrav.SAMPLING, restrav.params_from_onnx, restrav.build_onnx),
}


def scores(model: onnx.ModelProto | bytes, frames: np.ndarray) -> np.ndarray:
    """The graph's ``score`` output on the CPU."""
    import onnxruntime as ort

    data = model if isinstance(model, bytes) else model.SerializeToString()
    sess = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return sess.run(["score"], {"frames": frames})[0]


def rewrite(model_path: str | Path, name: str, frames: np.ndarray | None = None, atol: float = 1e-5) -> float:
    """Rewrite ``model_path`` (detector ``name``) in its GPU form from its own weights; return the largest score
    difference between the two forms on ``frames`` (default: 4 seeded random videos). Raises ``AssertionError``,
    writing nothing, when that exceeds ``atol``."""
    sampling, params_of, build = REWRITES[name]
    old = Path(model_path).read_bytes()
    new = build(params_of(onnx.load_from_string(old)))
    if frames is None:
        shape = (4, sampling.frames, sampling.height, sampling.width, 3)
        frames = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    gap = float(np.max(np.abs(scores(old, frames) - scores(new, frames))))
    if not gap <= atol:
        raise AssertionError(f"{name}: the rewritten graph's scores differ by {gap:.3g} (> {atol:g})")
    onnx.save(new, str(model_path))
    return gap
