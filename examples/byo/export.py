"""Export a per-frame classifier the usual way: [N, 3, 224, 224] float32, ImageNet-normalised RGB in, two-class
softmax out. Any torch model exported like this can be added with the card beside this file:

    python examples/byo/export.py model.onnx
    lastmile detectors add model.onnx --card examples/byo/card.yaml --dry-run
"""

from __future__ import annotations

import sys

import torch


class TinyClassifier(torch.nn.Module):
    """Stands in for your own network (random weights: it has learnt nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, stride=2), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten()
        )
        self.classifier = torch.nn.Linear(16, 2)  # class 0: real, class 1: generated

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.classifier(self.features(x)), dim=1)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = TinyClassifier().eval()
    batch = torch.export.Dim("batch", min=1, max=4096)
    torch.onnx.export(model, (torch.zeros(2, 3, 224, 224),), sys.argv[1] if len(sys.argv) > 1 else "model.onnx",
                      input_names=["input"], output_names=["probs"], dynamic_shapes={"x": {0: batch}})  # fmt: skip
