"""Detectors as people export them from PyTorch: small torch models in each input contract, exported with
``torch.onnx.export``, added with their cards, composed to the gateway's contract; the composed graph's scores
equal the torch model applied by hand to the same sampled frames."""

from __future__ import annotations

import numpy as np
import pytest

from detectors.card import ModelCard, load_card
from detectors.errors import CardError
from detectors.repository import install, list_detectors, prepare
from detectors.runtimes.embedded import EmbeddedRuntime
from tests.conftest import IN_CI
from transforms.sampling import SamplingPolicy, sample_frames

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


@pytest.fixture(scope="module")
def frames(media) -> np.ndarray:
    """Frames sampled from real clips exactly as the pipeline samples them for these cards."""
    policy = SamplingPolicy(mode="uniform", frames=T, height=H, width=W)
    return np.stack([sample_frames(media[name], policy) for name in ("basic", "scene", "odd")])


@pytest.mark.parametrize("case", sorted(CASES))
def test_composed_graph_equals_the_torch_model_by_hand(case, tmp_path, frames):
    build, inp, out = CASES[case]
    torch.manual_seed(0)
    model = build().eval()
    _export(model, inp["layout"], tmp_path / "model.onnx")
    card = _card(case, inp, out)
    inst = install(tmp_path / "model.onnx", card, tmp_path / "repo")
    stored = load_card(inst.folder / "card.yaml")
    assert stored.input.layout == "NTHWC" and stored.input.dtype == "uint8" and stored.source.input == card.input
    assert inst.model_sha256 == stored.source.composed_sha256 != stored.source.sha256
    assert list_detectors(tmp_path / "repo")[card.name].origin == "user"
    got = EmbeddedRuntime(inst.model_path, stored).score(frames)
    np.testing.assert_allclose(got, _by_hand(model, card, frames), atol=1e-5, rtol=1e-5)


def test_a_card_that_does_not_fit_lists_every_problem(tmp_path):
    torch.manual_seed(0)
    _export(Frame(2).eval(), "NCHW", tmp_path / "model.onnx")
    with pytest.raises(ValueError) as exc:  # the contract itself: two problems at once
        _card(
            "bad", {"layout": "NCHW", "dtype": "float32"}, {"kind": "two_class_logits", "direction": "higher_is_real"}
        )
    assert "aggregation" in str(exc.value) and "mean/std" in str(exc.value) and "generated_index" in str(exc.value)
    wrong = _card("bad", {"layout": "NCTHW", "dtype": "float32", **IMAGENET},
                  {"kind": "two_class_logits", "generated_index": 1, "direction": "higher_is_generated"})  # fmt: skip
    with pytest.raises(CardError) as exc:
        prepare(
            tmp_path / "model.onnx", wrong.model_copy(update={"output": wrong.output.model_copy(update={"name": "x"})})
        )
    assert "layout NCTHW is rank 5" in str(exc.value) and "output 'x' is not in the graph" in str(exc.value)
    three = _card("bad", {"layout": "NCHW", "dtype": "float32", **IMAGENET, "aggregation": "mean"},
                  {"kind": "two_class_logits", "generated_index": 1, "direction": "higher_is_generated"})  # fmt: skip
    _export(Frame(3).eval(), "NCHW", tmp_path / "three.onnx")
    with pytest.raises(CardError, match="last axis has 3 classes"):
        prepare(tmp_path / "three.onnx", three)


def test_the_readme_example_exports_and_adds_with_its_dozen_line_card(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, str(root / "examples/byo/export.py"), str(tmp_path / "model.onnx")], check=True,
                   capture_output=True)  # fmt: skip
    card = root / "examples" / "byo" / "card.yaml"
    assert len([line for line in card.read_text().splitlines() if line and not line.startswith("#")]) <= 12
    cli = [sys.executable, "-m", "gateway.cli", "detectors", "add", str(tmp_path / "model.onnx"), "--card", str(card),
           "--repo", str(tmp_path / "repo")]  # fmt: skip
    dry = subprocess.run([*cli, "--dry-run"], capture_output=True, text=True, check=True).stdout
    assert "front: uint8 [N, 8, 224, 224, 3] RGB -> float32" in dry and "nothing written" in dry
    assert not (tmp_path / "repo").exists()
    subprocess.run(cli, capture_output=True, text=True, check=True)
    inst = list_detectors(tmp_path / "repo")["my-detector"]
    scores = EmbeddedRuntime(inst.model_path, inst.card).score(np.zeros(inst.card.input_shape(2), np.uint8))
    assert scores.shape == (2,) and ((scores >= 0) & (scores <= 1)).all()  # a probability of "generated"
