"""Detectors as people export them from PyTorch: small torch models in each input contract, exported with
``torch.onnx.export``, added with their cards, composed to the gateway's contract; the composed graph's scores
equal the torch model applied by hand to the same sampled frames."""

from __future__ import annotations

import numpy as np
import pytest

from detectors.card import load_card
from detectors.errors import CardError
from detectors.repository import install, list_detectors, prepare
from detectors.runtimes.embedded import EmbeddedRuntime
from tests.support.torch_models import CASES, IMAGENET, Frame, H, T, W, _by_hand, _card, _export, torch
from transforms.sampling import SamplingPolicy, sample_frames


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
