"""``npr``: Neighbouring Pixel Relationships (Tan et al., CVPR'24), the video form of DeMamba's NPR.py.

Residual r = x - up2(down2(x)) (nearest both ways), scaled by 2/3 as in the official code, then conv3x3
stride 2 -> BN -> ReLU -> maxpool -> ResNet-50 bottleneck layer1 (3 blocks) and layer2 (4 blocks) -> global
average pool -> mean over the T frames -> Linear -> logit (higher = generated). Trained from scratch.
For CPU the width is a quarter of the paper's (16/32 planes instead of 64/128); the card says so.
The torch module is the reference implementation; the ONNX graph is written from its weights with
batch norm folded into the convolutions.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from detectors.reference.graph import GraphBuilder, uint8_video_input
from transforms.sampling import SamplingPolicy

NAME = "npr"
SAMPLING = SamplingPolicy(mode="uniform", frames=8, height=128, width=128, resize="center_crop")
WIDTH = 16  # planes of layer1 (paper: 64)
MEAN = np.array([0.485, 0.456, 0.406], np.float32)
STD = np.array([0.229, 0.224, 0.225], np.float32)
BLOCKS = (3, 4)
BN_EPS = 1e-5


def npr_residual(x: np.ndarray) -> np.ndarray:
    """x - up2(down2(x)) with nearest sampling, for ``[..., H, W]`` arrays (H, W even).

    Zero exactly where every 2x2 block is constant: NPR sees only what up-sampling leaves behind.
    """
    down = x[..., ::2, ::2]
    return x - down.repeat(2, axis=-2).repeat(2, axis=-1)


def torch_model(width: int = WIDTH):
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        expansion = 4

        def __init__(self, inplanes: int, planes: int, stride: int) -> None:
            super().__init__()
            out = planes * self.expansion
            self.conv1, self.bn1 = nn.Conv2d(inplanes, planes, 1, bias=False), nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.conv3, self.bn3 = nn.Conv2d(planes, out, 1, bias=False), nn.BatchNorm2d(out)
            self.downsample = None
            if stride != 1 or inplanes != out:
                self.downsample = nn.Sequential(
                    nn.Conv2d(inplanes, out, 1, stride=stride, bias=False), nn.BatchNorm2d(out)
                )

        def forward(self, x):
            idt = x if self.downsample is None else self.downsample(x)
            y = torch.relu(self.bn1(self.conv1(x)))
            y = torch.relu(self.bn2(self.conv2(y)))
            return torch.relu(self.bn3(self.conv3(y)) + idt)

    class NPRNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, width, 3, stride=2, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
            blocks, inplanes = [], width
            for i, (n, planes) in enumerate(zip(BLOCKS, (width, 2 * width), strict=True)):
                layer = []
                for b in range(n):
                    layer.append(Bottleneck(inplanes, planes, 2 if (i == 1 and b == 0) else 1))
                    inplanes = planes * 4
                blocks.append(nn.Sequential(*layer))
            self.layer1, self.layer2 = blocks
            self.fc = nn.Linear(inplanes, 1)
            self.register_buffer("mean", torch.tensor(MEAN).view(1, 3, 1, 1))
            self.register_buffer("std", torch.tensor(STD).view(1, 3, 1, 1))

        def forward(self, frames):
            n, t, h, w, _ = frames.shape
            x = frames.reshape(n * t, h, w, 3).permute(0, 3, 1, 2).float() / 255.0
            x = (x - self.mean) / self.std
            down = x[:, :, ::2, ::2]
            r = (x - down.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)) * (2.0 / 3.0)
            y = self.maxpool(torch.relu(self.bn1(self.conv1(r))))
            y = self.layer2(self.layer1(y))
            feat = y.mean(dim=(2, 3)).reshape(n, t, -1).mean(dim=1)
            return self.fc(feat).reshape(n)

    return NPRNet()


def _fold(state: dict[str, np.ndarray], conv: str, bn: str) -> tuple[np.ndarray, np.ndarray]:
    w = state[f"{conv}.weight"]
    scale = state[f"{bn}.weight"] / np.sqrt(state[f"{bn}.running_var"] + BN_EPS)
    return w * scale[:, None, None, None], state[f"{bn}.bias"] - state[f"{bn}.running_mean"] * scale


def build_onnx(state: dict[str, np.ndarray], width: int = WIDTH) -> onnx.ModelProto:
    """The NPR graph from a torch ``state_dict`` (as numpy arrays), batch norm folded."""
    s = SAMPLING
    g = GraphBuilder(NAME)

    def conv(x: str, prefix_conv: str, prefix_bn: str, stride: int, pad: int, relu: bool) -> str:
        w, b = _fold(state, prefix_conv, prefix_bn)
        k = w.shape[-1]
        y = g.op("Conv", x, g.const(w), g.const(b), kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)
        return g.op("Relu", y) if relu else y

    x = g.frames_to_float("frames")
    x = g.op("Transpose", g.op("Reshape", x, g.ints([-1, s.height, s.width, 3])), perm=[0, 3, 1, 2])
    x = g.op("Div", g.op("Sub", x, g.const(MEAN.reshape(1, 3, 1, 1))), g.const(STD.reshape(1, 3, 1, 1)))
    down = g.op("Slice", x, g.ints([0, 0]), g.ints([s.height, s.width]), g.ints([2, 3]), g.ints([2, 2]))
    up = g.op(
        "Resize",
        down,
        "",
        g.const([1, 1, 2, 2]),
        mode="nearest",
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )
    r = g.op("Mul", g.op("Sub", x, up), g.const(2.0 / 3.0))
    y = conv(r, "conv1", "bn1", 2, 1, True)
    y = g.op("MaxPool", y, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    for li, n in enumerate(BLOCKS, start=1):
        for b in range(n):
            p = f"layer{li}.{b}"
            stride = 2 if (li == 2 and b == 0) else 1
            h = conv(y, f"{p}.conv1", f"{p}.bn1", 1, 0, True)
            h = conv(h, f"{p}.conv2", f"{p}.bn2", stride, 1, True)
            h = conv(h, f"{p}.conv3", f"{p}.bn3", 1, 0, False)
            idt = (
                conv(y, f"{p}.downsample.0", f"{p}.downsample.1", stride, 0, False)
                if f"{p}.downsample.0.weight" in state
                else y
            )
            y = g.op("Relu", g.op("Add", h, idt))
    feat = g.op("ReduceMean", y, axes=[2, 3], keepdims=0)  # [NT, C]
    feat = g.op("ReduceMean", g.op("Reshape", feat, g.ints([-1, s.frames, 8 * width])), axes=[1], keepdims=0)
    logit = g.op("Add", g.op("MatMul", feat, g.const(state["fc.weight"].T)), g.const(state["fc.bias"]))
    g.op("Reshape", logit, g.ints([-1]), out="score")
    return g.build("frames", uint8_video_input(s.frames, s.height, s.width), TensorProto.UINT8, "score")
