"""``spectral``: Durall et al. (CVPR'20, "Watch your up-convolution") on video frames.

Per frame: grey -> 2-D FFT -> 20 log10(|F| + ε) -> azimuthal average over integer radii (the fftshift is
implicit: radii are measured from the DC term) -> linear resampling to 300 bins -> min-max normalisation.
The video's feature is the mean profile over T frames; a logistic regression gives the logit
(higher = generated).

In ONNX the 2-D DFT is two real MatMuls with a constant DFT basis (``X = F_H x F_W`` with ``F = C - iS``) and
the azimuthal sum a gather by radius, a cumulative sum and a difference at each radius's end: operators that
onnxruntime's CUDA provider has kernels for in float64 (``DFT`` and a scatter-add do not, or not
deterministically), so the whole graph runs on the GPU. ``build_onnx(p, fft="dft")`` still writes the first
form (two ``DFT`` nodes, a ``ScatterElements`` add), kept to check the two against each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from detectors.reference.graph import GraphBuilder, uint8_video_input
from transforms.sampling import SamplingPolicy

NAME = "spectral"
SAMPLING = SamplingPolicy(mode="uniform", frames=8, height=128, width=128, resize="center_crop")
BINS = 300
EPS = 1e-6
_GREY = np.array([0.299, 0.587, 0.114])
F64 = np.float64  # float64 from the DFT on: float32 left ~5e-5 on the features, amplified by the LR weights


@dataclass
class SpectralParams:
    weight: np.ndarray  # [300]
    bias: float


@lru_cache(maxsize=4)
def radial_index(height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer radius of each (unshifted) FFT bin from DC, flattened, and the count of bins per radius."""
    fy = np.fft.fftfreq(height) * height
    fx = np.fft.fftfreq(width) * width
    r = np.floor(np.hypot(fy[:, None], fx[None, :])).astype(np.int64).reshape(-1)
    return r, np.bincount(r)


@lru_cache(maxsize=4)
def resample_matrix(n_in: int, n_out: int = BINS) -> np.ndarray:
    """``[n_in, n_out]``: linear interpolation of a length-n_in profile at n_out evenly spaced points."""
    eye = np.eye(n_in)
    at = np.linspace(0, n_in - 1, n_out)
    return np.stack([np.interp(at, np.arange(n_in), eye[i]) for i in range(n_in)])


@lru_cache(maxsize=4)
def dft_basis(n: int) -> np.ndarray:
    """``[2n, n]``: the n-point DFT matrix ``F = C - iS`` as its two real parts, stacked: ``[C; S]`` with
    ``C[j, k] = cos(2πjk/n)`` and ``S[j, k] = sin(2πjk/n)`` (both symmetric)."""
    k = np.arange(n)
    angle = 2 * np.pi * ((k[:, None] * k[None, :]) % n) / n  # the product reduced mod n first: exact angles
    return np.concatenate([np.cos(angle), np.sin(angle)])


def azimuthal_profile(grey: np.ndarray) -> np.ndarray:
    """One grey image ``[H, W]`` in [0, 1] -> its normalised 300-bin azimuthal log-spectrum."""
    r, counts = radial_index(*grey.shape)
    mag_db = 20 * np.log10(np.abs(np.fft.fft2(grey)) + EPS).reshape(-1)
    profile = np.bincount(r, weights=mag_db) / counts
    p = profile @ resample_matrix(len(counts))
    return (p - p.min()) / (p.max() - p.min() + EPS)


def features(frames: np.ndarray) -> np.ndarray:
    """``[N, T, H, W, 3]`` uint8 -> ``[N, 300]``: mean normalised profile over the T frames."""
    grey = (frames.astype(np.float64) / 255.0) @ _GREY
    return np.stack([np.mean([azimuthal_profile(f) for f in video], axis=0) for video in grey])


def score(frames: np.ndarray, p: SpectralParams) -> np.ndarray:
    return features(frames) @ p.weight + p.bias


def params_from_onnx(model: onnx.ModelProto) -> SpectralParams:
    """The logistic regression of a built ``spectral`` graph (either form), exactly as stored: the weight is
    the one ``[300, 1]`` initializer a MatMul takes, the bias the constant the Add after it takes."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    nodes = list(model.graph.node)
    for i, node in enumerate(nodes):
        w = inits.get(node.input[1]) if node.op_type == "MatMul" and len(node.input) == 2 else None
        if w is not None and w.shape == (BINS, 1):
            add = next(n for n in nodes[i + 1 :] if n.op_type == "Add" and node.output[0] in n.input)
            bias = inits[next(x for x in add.input if x != node.output[0])]
            return SpectralParams(w.reshape(-1), float(bias))
    raise ValueError(f"{model.graph.name}: no [{BINS}, 1] logistic-regression weight in this graph")


def _spectrum_dft(g: GraphBuilder, grey: str, h: int, w: int) -> str:
    """``[NT, H, W]`` -> ``|F|²`` with two ONNX ``DFT`` nodes (no CUDA kernel: the first form)."""
    x = g.op("Unsqueeze", grey, g.ints([-1]))  # [NT,H,W,1] real signal
    spec = g.op("DFT", g.op("DFT", x, axis=1), axis=2)  # [NT,H,W,2]
    return g.op("ReduceSum", g.op("Mul", spec, spec), g.ints([-1]), keepdims=0)


def _spectrum_matmul(g: GraphBuilder, grey: str, h: int, w: int) -> str:
    """``[NT, H, W]`` -> ``|F|²`` as real MatMuls: ``[C;S] x [C,S] = [[CxC, CxS], [SxC, SxS]]``, then
    ``Re = CxC - SxS`` and ``-Im = CxS + SxC``."""
    left = g.const(dft_basis(h), "dft_rows", F64)  # [2H, H]
    right = g.op("Transpose", left if h == w else g.const(dft_basis(w), "dft_cols", F64), perm=[1, 0])  # [W, 2W]
    blocks = g.op("MatMul", g.op("MatMul", left, grey), right)  # [NT, 2H, 2W]

    def block(row: int, col: int) -> str:
        return g.op("Slice", blocks, g.ints([row * h, col * w]), g.ints([(row + 1) * h, (col + 1) * w]), g.ints([1, 2]))

    re = g.op("Sub", block(0, 0), block(1, 1))
    im = g.op("Add", block(0, 1), block(1, 0))
    return g.op("Add", g.op("Mul", re, re), g.op("Mul", im, im))


def _radial_mean_scatter(g: GraphBuilder, flat: str, r: np.ndarray, counts: np.ndarray) -> str:
    """``[NT, H*W]`` -> per-radius means ``[NT, R]`` by a ScatterElements add (the first form)."""
    shape = g.op("Shape", flat)
    zeros = g.op(
        "ConstantOfShape",
        g.op("Concat", g.op("Slice", shape, g.ints([0]), g.ints([1])), g.ints([len(counts)]), axis=0),
        value=onnx.helper.make_tensor("zero", TensorProto.DOUBLE, [1], [0.0]),
    )
    index = g.op("Expand", g.const(r.reshape(1, -1), dtype=np.int64), shape)
    sums = g.op("ScatterElements", zeros, index, flat, axis=1, reduction="add")
    return g.op("Div", sums, g.const(counts, dtype=F64))


def _radial_profile_cumsum(g: GraphBuilder, flat: str, r: np.ndarray, counts: np.ndarray) -> str:
    """``[NT, H*W]`` -> the resampled profile ``[NT, 300]``: bins gathered in radius order, a cumulative sum,
    its value at each radius's last bin, then one constant matrix that takes the differences (the sums per
    radius), divides by the counts and resamples. Deterministic on a GPU, unlike an atomic scatter-add."""
    order = np.argsort(r, kind="stable")
    ends = np.cumsum(counts) - 1
    step = np.eye(len(counts)) - np.eye(len(counts), k=1)  # column k of (cumulative @ step): S_k - S_{k-1}
    to_profile = (step / counts[None, :]) @ resample_matrix(len(counts))
    by_radius = g.op("Gather", flat, g.const(order, "by_radius", np.int32), axis=1)
    cumulative = g.op("CumSum", by_radius, g.ints([1]))
    at_ends = g.op("Gather", cumulative, g.const(ends, "radius_ends", np.int32), axis=1)
    return g.op("MatMul", at_ends, g.const(to_profile, "to_profile", F64))


def build_onnx(p: SpectralParams, fft: Literal["matmul", "dft"] = "matmul") -> onnx.ModelProto:
    """The graph; ``fft="dft"`` writes the first form (ONNX ``DFT`` + ``ScatterElements``), with no CUDA kernel."""
    s = SAMPLING
    h, w = s.height, s.width
    r, counts = radial_index(h, w)
    g = GraphBuilder(NAME)
    pixels = g.op("Div", g.op("Cast", "frames", to=TensorProto.DOUBLE), g.const(255.0, dtype=F64))
    grey = g.op("ReduceSum", g.op("Mul", pixels, g.const(_GREY, dtype=F64)), g.ints([-1]), keepdims=0)  # [N,T,H,W]
    grey = g.op("Reshape", grey, g.ints([-1, h, w]))
    power = (_spectrum_dft if fft == "dft" else _spectrum_matmul)(g, grey, h, w)
    log_mag = g.op("Log", g.op("Add", g.op("Sqrt", power), g.const(EPS, dtype=F64)))
    mag_db = g.op("Mul", log_mag, g.const(20 / np.log(10), dtype=F64))
    flat = g.op("Reshape", mag_db, g.ints([0, -1]))  # [NT, H*W]
    if fft == "dft":
        mean = _radial_mean_scatter(g, flat, r, counts)
        profile = g.op("MatMul", mean, g.const(resample_matrix(len(counts)), dtype=F64))
    else:
        profile = _radial_profile_cumsum(g, flat, r, counts)
    lo = g.op("ReduceMin", profile, axes=[1], keepdims=1)
    hi = g.op("ReduceMax", profile, axes=[1], keepdims=1)
    norm = g.op("Div", g.op("Sub", profile, lo), g.op("Add", g.op("Sub", hi, lo), g.const(EPS, dtype=F64)))
    feats = g.op("ReduceMean", g.op("Reshape", norm, g.ints([-1, s.frames, BINS])), axes=[1], keepdims=0)
    logit64 = g.op(
        "Add", g.op("MatMul", feats, g.const(p.weight.reshape(-1, 1), dtype=F64)), g.const(p.bias, dtype=F64)
    )
    logit = g.op("Cast", logit64, to=TensorProto.FLOAT)
    g.op("Reshape", logit, g.ints([-1]), out="score")
    return g.build("frames", uint8_video_input(s.frames, h, w), TensorProto.UINT8, "score")
