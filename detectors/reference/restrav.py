"""``restrav_px``: ReStraV (NeurIPS'25) trajectory features on pixel embeddings + its 21-64-32-1 MLP.

24 frames over 2 s (12 fps). From the embedding trajectory: step lengths d_t and turning angles θ_t; the
21-D vector is d[0:7], θ[0:6], then mean, min, max and variance of d and of θ. The features are
standardised with training statistics, then an MLP 21-64-32-1 (ReLU) gives a logit, higher = generated.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from detectors.reference import trajectory
from detectors.reference.graph import GraphBuilder, uint8_video_input
from transforms.sampling import SamplingPolicy

NAME = "restrav_px"
SAMPLING = SamplingPolicy(mode="fps_window", fps=12.0, frames=24, height=64, width=64, resize="stretch")
N_FEATURES = 21


@dataclass
class RestravParams:
    mean: np.ndarray  # [21]
    std: np.ndarray  # [21]
    w1: np.ndarray  # [21, 64]
    b1: np.ndarray
    w2: np.ndarray  # [64, 32]
    b2: np.ndarray
    w3: np.ndarray  # [32, 1]
    b3: np.ndarray


def _stats(v: np.ndarray) -> list[np.ndarray]:
    return [v.mean(axis=1), v.min(axis=1), v.max(axis=1), v.var(axis=1)]


def features(frames: np.ndarray) -> np.ndarray:
    """``[N, T, H, W, 3]`` uint8 -> ``[N, 21]`` ReStraV features (numpy reference)."""
    delta, d = trajectory.steps(trajectory.embed(frames))
    theta = trajectory.turning_angles(delta, d)
    cols = [d[:, :7], theta[:, :6], np.stack(_stats(d), 1), np.stack(_stats(theta), 1)]
    return np.concatenate(cols, axis=1)


def score(frames: np.ndarray, p: RestravParams) -> np.ndarray:
    z = (features(frames) - p.mean) / p.std
    h = np.maximum(z @ p.w1 + p.b1, 0)
    h = np.maximum(h @ p.w2 + p.b2, 0)
    return (h @ p.w3 + p.b3).reshape(-1)


def params_from_onnx(model: onnx.ModelProto) -> RestravParams:
    """The standardisation and MLP of a built ``restrav_px`` graph, exactly as stored: the constants the Sub and
    Div after the feature Concat take, then each MatMul's weight and the bias of the Add after it."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}

    def after(output: str) -> onnx.NodeProto:
        return next(n for n in model.graph.node if output in n.input)

    sub = after(next(n for n in model.graph.node if n.op_type == "Concat").output[0])
    div = after(sub.output[0])
    values, x = [inits[sub.input[1]], inits[div.input[1]]], div.output[0]
    for _ in range(3):
        matmul = after(x)
        add = after(matmul.output[0])
        values += [inits[matmul.input[1]], inits[add.input[1]]]
        x = after(add.output[0]).output[0]  # past the ReLU (after the last Add: the Reshape)
    return RestravParams(*values)


def build_onnx(p: RestravParams, acos: str = "polynomial") -> onnx.ModelProto:
    """The graph; ``acos="onnx"`` writes the first form (an ONNX ``Acos``, with no CUDA kernel)."""
    s = SAMPLING
    g = GraphBuilder(NAME)
    e = trajectory.embed_graph(g, g.frames_to_float("frames"), s.frames, s.height, s.width)
    delta, d = trajectory.steps_graph(g, e, s.frames)
    theta = trajectory.turning_angles_graph(g, delta, d, s.frames, acos)
    parts = [
        g.op("Slice", d, g.ints([0]), g.ints([7]), g.ints([1])),
        g.op("Slice", theta, g.ints([0]), g.ints([6]), g.ints([1])),
    ]
    for v in (d, theta):
        mean = g.op("ReduceMean", v, axes=[1], keepdims=1)
        centred = g.op("Sub", v, mean)
        var = g.op("ReduceMean", g.op("Mul", centred, centred), axes=[1], keepdims=1)
        parts += [mean, g.op("ReduceMin", v, axes=[1], keepdims=1), g.op("ReduceMax", v, axes=[1], keepdims=1), var]
    feats = g.op("Concat", *parts, axis=1)
    z = g.op("Div", g.op("Sub", feats, g.const(p.mean)), g.const(p.std))
    h = g.op("Relu", g.op("Add", g.op("MatMul", z, g.const(p.w1)), g.const(p.b1)))
    h = g.op("Relu", g.op("Add", g.op("MatMul", h, g.const(p.w2)), g.const(p.b2)))
    logit = g.op("Add", g.op("MatMul", h, g.const(p.w3)), g.const(p.b3))
    g.op("Reshape", logit, g.ints([-1]), out="score")
    return g.build("frames", uint8_video_input(s.frames, s.height, s.width), TensorProto.UINT8, "score")
