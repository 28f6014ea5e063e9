"""Per-frame pixel embeddings and their trajectory statistics (shared by ``d3_px`` and ``restrav_px``).

The embedding is fixed (no learned encoder): each frame, scaled to 64x64 by the sampler, is average-pooled
4x4 to a 16x16x3 = 768-d vector in [0, 1]. ReStraV (NeurIPS'25) and D3 (ICCV'25) use pretrained encoders
here; with pixel embeddings they are *pixel-embedding variants*, named so (``*_px``).
"""

from __future__ import annotations

import numpy as np

from detectors.reference.graph import GraphBuilder

POOL = 4


def embed(frames: np.ndarray) -> np.ndarray:
    """``[N, T, H, W, 3]`` uint8 -> ``[N, T, (H/4)(W/4)3]`` float64 embeddings (4x4 average pooling)."""
    x = frames.astype(np.float64) / 255.0
    n, t, h, w, c = x.shape
    pooled = x.reshape(n, t, h // POOL, POOL, w // POOL, POOL, c).mean(axis=(3, 5))
    return pooled.transpose(0, 1, 4, 2, 3).reshape(n, t, -1)  # channel-major, as the graph flattens NCHW


def steps(e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Displacements Δ_t = e_{t+1} - e_t ``[N, T-1, D]`` and step lengths d_t = ||Δ_t|| ``[N, T-1]``."""
    delta = np.diff(e, axis=1)
    return delta, np.linalg.norm(delta, axis=2)


EPS = 1e-8


def turning_angles(delta: np.ndarray, d: np.ndarray) -> np.ndarray:
    """θ_t = arccos(<Δ_t, Δ_{t+1}> / (d_t d_{t+1} + ε)), clipped to [-1, 1]; ``[N, T-2]`` radians."""
    dots = np.sum(delta[:, 1:] * delta[:, :-1], axis=2)
    return np.arccos(np.clip(dots / (d[:, 1:] * d[:, :-1] + EPS), -1.0, 1.0))


# -- the same in ONNX -------------------------------------------------------------------------------------
def embed_graph(g: GraphBuilder, x_float: str, frames: int, height: int, width: int) -> str:
    """float ``[N,T,H,W,3]`` -> ``[N, T, D]`` embeddings, matching :func:`embed`."""
    nchw = g.op("Transpose", g.op("Reshape", x_float, g.ints([-1, height, width, 3])), perm=[0, 3, 1, 2])
    pooled = g.op("AveragePool", nchw, kernel_shape=[POOL, POOL], strides=[POOL, POOL])
    return g.op("Reshape", pooled, g.ints([-1, frames, 3 * (height // POOL) * (width // POOL)]))


def steps_graph(g: GraphBuilder, e: str, frames: int) -> tuple[str, str]:
    later = g.op("Slice", e, g.ints([1]), g.ints([frames]), g.ints([1]))
    earlier = g.op("Slice", e, g.ints([0]), g.ints([frames - 1]), g.ints([1]))
    delta = g.op("Sub", later, earlier)
    d = g.op("Sqrt", g.op("ReduceSum", g.op("Mul", delta, delta), g.ints([2]), keepdims=0))
    return delta, d


def turning_angles_graph(g: GraphBuilder, delta: str, d: str, frames: int, acos: str = "polynomial") -> str:
    """θ_t as :func:`turning_angles`; ``acos="onnx"`` uses the ONNX ``Acos`` operator (the first form, which
    onnxruntime's CUDA provider has no kernel for), the default the polynomial :func:`acos_graph`."""
    n = frames - 1
    d_next = g.op("Slice", delta, g.ints([1]), g.ints([n]), g.ints([1]))
    d_prev = g.op("Slice", delta, g.ints([0]), g.ints([n - 1]), g.ints([1]))
    dots = g.op("ReduceSum", g.op("Mul", d_next, d_prev), g.ints([2]), keepdims=0)
    len_next = g.op("Slice", d, g.ints([1]), g.ints([n]), g.ints([1]))
    len_prev = g.op("Slice", d, g.ints([0]), g.ints([n - 1]), g.ints([1]))
    denom = g.op("Add", g.op("Mul", len_next, len_prev), g.const(EPS))
    cos = g.op("Clip", g.op("Div", dots, denom), g.const(-1.0), g.const(1.0))
    return g.op("Acos", cos) if acos == "onnx" else acos_graph(g, cos)


# Abramowitz & Stegun 4.4.46: arccos(x) = sqrt(1 - x) (a0 + a1 x + ... + a7 x^7) + ε on [0, 1], |ε| <= 2e-8
ACOS_COEFFS = (
    1.5707963050,
    -0.2145988016,
    0.0889789874,
    -0.0501743046,
    0.0308918810,
    -0.0170881256,
    0.0066700901,
    -0.0012624911,
)


def acos_graph(g: GraphBuilder, x: str) -> str:
    """arccos of ``x`` in [-1, 1] from Abs, Sqrt, Sign and a polynomial: operators with CUDA and TensorRT
    kernels (onnxruntime's CUDA provider has no ``Acos``). ``arccos(-x) = π - arccos(x)`` gives the negative half:
    ``π/2 + sign(x) (r - π/2)`` with ``r = arccos(|x|)``. Within 2e-8 of arccos, plus float32 rounding."""
    ax = g.op("Abs", x)
    poly = g.const(ACOS_COEFFS[-1])
    for a in reversed(ACOS_COEFFS[:-1]):  # Horner
        poly = g.op("Add", g.op("Mul", poly, ax), g.const(a))
    r = g.op("Mul", g.op("Sqrt", g.op("Sub", g.const(1.0), ax)), poly)
    half_pi = g.const(np.pi / 2)
    return g.op("Add", half_pi, g.op("Mul", g.op("Sign", x), g.op("Sub", r, half_pi)))
