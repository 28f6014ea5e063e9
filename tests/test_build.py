"""`lastmile detectors build` on a tiny proxy corpus: one loop over the reference registry trains, checks each
ONNX graph against its reference implementation, calibrates and installs every detector with its card."""

from __future__ import annotations

import json

import numpy as np
import pytest

from detectors.reference.registry import REFERENCE_DETECTORS
from detectors.repository import list_detectors
from detectors.runtimes.embedded import EmbeddedRuntime

torch = pytest.importorskip("torch", reason="building needs the extra `train` (torch)")


def test_a_small_build_installs_every_reference_detector(tmp_path):
    from detectors.reference.build import BuildConfig, build

    repo = tmp_path / "repo"
    summary = build(BuildConfig(seed=7, anchors=4, npr_epochs=1), repo, log=lambda m: None)
    names = [ref.name for ref in REFERENCE_DETECTORS]
    assert sorted(summary["detectors"]) == sorted(names)
    assert json.loads((repo / "BUILD.json").read_text())["seed"] == 7
    installed = list_detectors(repo)
    assert sorted(installed) == sorted(names)
    for ref in REFERENCE_DETECTORS:
        card = installed[ref.name].card
        assert card.version == "1.0.0-proxy7" and card.sampling == ref.sampling
        assert card.output.direction == ref.card.direction
        assert ("none (training-free)" in card.training_data) != ref.card.trained
        assert summary["detectors"][ref.name]["onnx_vs_reference"] < 1e-3
        assert (repo / ref.name / "configs" / "local.pbtxt").exists()
        frames = np.zeros(card.input_shape(2), dtype=np.uint8)
        assert EmbeddedRuntime(installed[ref.name].model_path, card).score(frames).shape == (2,)
