"""``spectral``: Durall et al. (CVPR'20, "Watch your up-convolution") on video frames.

Per frame: grey -> 2-D FFT -> 20 log10(|F| + ε) -> azimuthal average over integer radii (the fftshift is
implicit: radii are measured from the DC term) -> linear resampling to 300 bins -> min-max normalisation.
The video's feature is the mean profile over T frames; a logistic regression gives the logit
(higher = generated). In ONNX the FFT is the ``DFT`` operator and the azimuthal sum a scatter-add.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import onnx
from onnx import TensorProto

from detectors.reference.graph import GraphBuilder, uint8_video_input
from transforms.sampling import SamplingPolicy

NAME = "spectral"
SAMPLING = SamplingPolicy(mode="uniform", frames=8, height=128, width=128, resize="center_crop")
BINS = 300
EPS = 1e-6
_GREY = np.array([0.299, 0.587, 0.114])


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


def build_onnx(p: SpectralParams) -> onnx.ModelProto:
    s = SAMPLING
    h, w = s.height, s.width
    r, counts = radial_index(h, w)
    g = GraphBuilder(NAME)
    f64 = np.float64  # float64 from the DFT on: float32 left ~5e-5 on the features, amplified by the LR weights
    pixels = g.op("Div", g.op("Cast", "frames", to=TensorProto.DOUBLE), g.const(255.0, dtype=f64))
    grey = g.op("ReduceSum", g.op("Mul", pixels, g.const(_GREY, dtype=f64)), g.ints([-1]), keepdims=0)  # [N,T,H,W]
    x = g.op("Unsqueeze", g.op("Reshape", grey, g.ints([-1, h, w])), g.ints([-1]))  # [NT,H,W,1] real signal
    spec = g.op("DFT", g.op("DFT", x, axis=1), axis=2)  # [NT,H,W,2]
    power = g.op("ReduceSum", g.op("Mul", spec, spec), g.ints([-1]), keepdims=0)
    log_mag = g.op("Log", g.op("Add", g.op("Sqrt", power), g.const(EPS, dtype=f64)))
    mag_db = g.op("Mul", log_mag, g.const(20 / np.log(10), dtype=f64))
    flat = g.op("Reshape", mag_db, g.ints([0, -1]))  # [NT, H*W]
    shape = g.op("Shape", flat)
    zeros = g.op(
        "ConstantOfShape",
        g.op("Concat", g.op("Slice", shape, g.ints([0]), g.ints([1])), g.ints([len(counts)]), axis=0),
        value=onnx.helper.make_tensor("zero", TensorProto.DOUBLE, [1], [0.0]),
    )
    index = g.op("Expand", g.const(r.reshape(1, -1), dtype=np.int64), shape)
    sums = g.op("ScatterElements", zeros, index, flat, axis=1, reduction="add")
    mean = g.op("Div", sums, g.const(counts, dtype=f64))
    profile = g.op("MatMul", mean, g.const(resample_matrix(len(counts)), dtype=f64))
    lo = g.op("ReduceMin", profile, axes=[1], keepdims=1)
    hi = g.op("ReduceMax", profile, axes=[1], keepdims=1)
    norm = g.op("Div", g.op("Sub", profile, lo), g.op("Add", g.op("Sub", hi, lo), g.const(EPS, dtype=f64)))
    feats = g.op("ReduceMean", g.op("Reshape", norm, g.ints([-1, s.frames, BINS])), axes=[1], keepdims=0)
    logit64 = g.op(
        "Add", g.op("MatMul", feats, g.const(p.weight.reshape(-1, 1), dtype=f64)), g.const(p.bias, dtype=f64)
    )
    logit = g.op("Cast", logit64, to=TensorProto.FLOAT)
    g.op("Reshape", logit, g.ints([-1]), out="score")
    return g.build("frames", uint8_video_input(s.frames, h, w), TensorProto.UINT8, "score")
