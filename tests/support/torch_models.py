"""Small torch models in each input contract, their cards and exports, and the models applied by hand (shared by
`tests/test_compose.py` and `tests/test_remote.py`). Importing it skips (fails in CI) where torch is missing."""

from __future__ import annotations

import numpy as np
import pytest

from detectors.card import ModelCard
from tests.support.tools import IN_CI

try:
    import torch
except ImportError:  # pragma: no cover - CI installs the train extra
    if IN_CI:
        pytest.fail("torch (extra `train`) is required in CI to build the test models", pytrace=False)
    pytest.skip("building test models needs torch (extra `train`)", allow_module_level=True)

T, H, W = 4, 32, 32
REAL = {"direction": "higher_is_real"}
IMAGENET = {"mean": [0.485, 0.456, 0.406], "std": [0.229, 0.224, 0.225]}


class Frame(torch.nn.Module):
    """A per-frame model: [B, 3, H, W] -> ``out`` classes (or one score)."""

    def __init__(self, out: int, head: str = "none") -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                                        torch.nn.Flatten(), torch.nn.Linear(6, out))  # fmt: skip
        self.head = head

    def forward(self, x):
        y = self.body(x)
        if self.head == "softmax":
            return torch.softmax(y, dim=1)
        return torch.sigmoid(y) if self.head == "sigmoid" else y


class Clip(torch.nn.Module):
    """A clip model: [B, 3, T, H, W] (or [B, T, 3, H, W] with ``ntchw``) -> ``out`` values."""

    def __init__(self, out: int, head: str = "none", ntchw: bool = False) -> None:
        super().__init__()
        self.conv = torch.nn.Conv3d(3, 4, 3)
        self.fc = torch.nn.Linear(4, out)
        self.head, self.ntchw = head, ntchw

    def forward(self, x):
        if self.ntchw:
            x = x.permute(0, 2, 1, 3, 4)
        y = self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3, 4)))
        return torch.softmax(y, dim=1) if self.head == "softmax" else y


CASES = {  # name -> (model, input contract, output contract)
    "nchw_mean_imagenet_logits": (
        lambda: Frame(2),
        {"layout": "NCHW", "dtype": "float32", "scale": "1/255", **IMAGENET, "aggregation": "mean"},
        {"kind": "two_class_logits", "generated_index": 1, "direction": "higher_is_generated"},
    ),
    "ncthw_clip_logit": (
        lambda: Clip(1),
        {"layout": "NCTHW", "dtype": "float32", "scale": "1/255", "mean": [0, 0, 0], "std": [1, 1, 1]},
        {"kind": "logit", "direction": "higher_is_generated"},
    ),
    "nchw_bgr_topk_sigmoid": (
        lambda: Frame(1, "sigmoid"),
        {"layout": "NCHW", "dtype": "float32", "scale": 1.0, "mean": [104, 117, 123], "std": [58, 57, 57],
         "channel_order": "BGR", "aggregation": "topk_mean", "top_k": 2},
        {"kind": "probability", "direction": "higher_is_generated"},
    ),
    "ntchw_two_class_softmax": (
        lambda: Clip(2, "softmax", ntchw=True),
        {"layout": "NTCHW", "dtype": "float32", "scale": "1/255", **IMAGENET},
        {"kind": "two_class_probabilities", "generated_index": 0, "direction": "higher_is_generated"},
    ),
    "nchw_max_higher_is_real": (
        lambda: Frame(1, "sigmoid"),
        {"layout": "NCHW", "dtype": "float32", "scale": "1/255", **IMAGENET, "aggregation": "max"},
        {"kind": "probability", "direction": "higher_is_real"},
    ),
}  # fmt: skip


def _card(name: str, inp: dict, out: dict) -> ModelCard:
    return ModelCard.model_validate({
        "name": name.replace("_", "-"), "version": "1", "family": "test", "license": "MIT",
        "input": {"name": "input", **inp}, "output": {"name": "output", **out},
        "sampling": {"mode": "uniform", "frames": T, "height": H, "width": W},
        "threshold": {"value": 0.0, "calibration": "none"}, "training_data": "random weights",
    })  # fmt: skip


def _export(model, layout: str, path) -> None:
    shape = {"NCHW": (2, 3, H, W), "NCTHW": (2, 3, T, H, W), "NTCHW": (2, T, 3, H, W)}[layout]
    batch = torch.export.Dim("batch", min=1, max=1024)
    torch.onnx.export(model, (torch.zeros(shape),), str(path), input_names=["input"], output_names=["output"],
                      dynamic_shapes={"x": {0: batch}})  # fmt: skip


def _by_hand(model, card: ModelCard, frames: np.ndarray) -> np.ndarray:
    """The card's contract applied with torch, then the output's meaning: what the composed graph must give."""
    i, o = card.input, card.output
    x = torch.tensor(frames, dtype=torch.float32)
    if i.channel_order == "BGR":
        x = x.flip(-1)
    x = (x * i.scale - torch.tensor(i.mean)) / torch.tensor(i.std)
    n = x.shape[0]
    x = {"NCHW": lambda v: v.permute(0, 1, 4, 2, 3).reshape(-1, 3, H, W), "NCTHW": lambda v: v.permute(0, 4, 1, 2, 3),
         "NTCHW": lambda v: v.permute(0, 1, 4, 2, 3)}[i.layout](x)  # fmt: skip
    with torch.no_grad():
        y = model(x)
    if o.kind == "two_class_logits":
        y = y[:, o.generated_index] - y[:, 1 - o.generated_index]
    elif o.kind == "two_class_probabilities":
        y = y[:, o.generated_index]
    y = y.reshape(-1)
    if i.layout == "NCHW":
        per_frame = y.reshape(n, T)
        y = {"mean": lambda v: v.mean(1), "max": lambda v: v.max(1).values,
             "topk_mean": lambda v: v.topk(i.top_k, dim=1).values.mean(1)}[i.aggregation](per_frame)  # fmt: skip
    y = y.double().numpy()
    return y if o.direction == "higher_is_generated" else -y
