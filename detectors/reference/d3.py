"""``d3_px``: the D3 statistic (ICCV'25) on fixed pixel embeddings. Training-free.

Frames at 8 fps, 16 of them; d1_t = ||e_{t+1} - e_t||, d2_t = d1_{t+1} - d1_t, native score = std(d2)
(population std). Real video has irregular motion (high std); the generated-score is -std, which the card
declares (``direction: higher_is_real``) and the runtime applies. The paper's encoders are pretrained; this
runs on pixel embeddings (see :mod:`detectors.reference.trajectory`), and its name says so.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from detectors.reference import trajectory
from detectors.reference.graph import GraphBuilder, uint8_video_input
from transforms.sampling import SamplingPolicy

NAME = "d3_px"
SAMPLING = SamplingPolicy(mode="fps_window", fps=8.0, frames=16, height=64, width=64, resize="stretch")


def native_score(frames: np.ndarray) -> np.ndarray:
    """std(d2) per video, ``[N]`` (numpy reference)."""
    _, d1 = trajectory.steps(trajectory.embed(frames))
    return np.diff(d1, axis=1).std(axis=1)


def build_onnx() -> onnx.ModelProto:
    s = SAMPLING
    g = GraphBuilder(NAME)
    e = trajectory.embed_graph(g, g.frames_to_float("frames"), s.frames, s.height, s.width)
    _, d1 = trajectory.steps_graph(g, e, s.frames)
    n = s.frames - 1
    d2 = g.op(
        "Sub",
        g.op("Slice", d1, g.ints([1]), g.ints([n]), g.ints([1])),
        g.op("Slice", d1, g.ints([0]), g.ints([n - 1]), g.ints([1])),
    )
    centred = g.op("Sub", d2, g.op("ReduceMean", d2, axes=[1], keepdims=1))
    var = g.op("ReduceMean", g.op("Mul", centred, centred), axes=[1], keepdims=0)
    g.op("Sqrt", var, out="score")
    return g.build("frames", uint8_video_input(s.frames, s.height, s.width), TensorProto.UINT8, "score")
