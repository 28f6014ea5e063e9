"""Model cards: validation against the graph, clear messages, and `lastmile detectors add`."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest
import yaml

from detectors.card import ModelCard, check_card_against_model, load_card
from detectors.errors import CardError
from detectors.reference import d3
from detectors.repository import get_detectors, install, list_detectors

CARD = {
    "name": "d3-user",
    "version": "2.0",
    "family": "trajectory",
    "input": {"name": "frames", "layout": "NTHWC", "dtype": "uint8"},
    "sampling": d3.SAMPLING.model_dump(),
    "output": {"name": "score", "direction": "higher_is_real", "native_score": "std of d2"},
    "threshold": {"value": -0.05, "calibration": "stated by the user"},
    "training_data": "none",
    "license": "MIT",
}


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "model.onnx"
    onnx.save(d3.build_onnx(), path)
    return path


def _card(**changes) -> ModelCard:
    raw = {**CARD, **changes}
    return ModelCard.model_validate(raw)


def test_a_correct_card_passes_and_installs(tmp_path, model_file):
    inst = install(model_file, _card(), tmp_path / "repo")
    assert inst.model_path.exists() and (tmp_path / "repo" / "d3-user" / "card.yaml").exists()
    listed = {name: inst.origin for name, inst in list_detectors(tmp_path / "repo").items()}
    assert listed == {"d3_px": "shipped", "npr": "shipped", "restrav_px": "shipped", "spectral": "shipped",
                      "d3-user": "user"}  # fmt: skip
    assert get_detectors("d3-user", tmp_path / "repo")[0].card.output.direction == "higher_is_real"
    with pytest.raises(CardError, match="exists"):
        install(model_file, _card(), tmp_path / "repo")


@pytest.mark.parametrize(
    "changes, message",
    [
        (
            {"input": {"name": "video", "dtype": "uint8"}},
            r"card input 'video' is not in the graph \(graph inputs: \['frames'\]\)",
        ),
        (
            {"input": {"name": "frames", "dtype": "float32", "mean": [0, 0, 0], "std": [1, 1, 1]}},
            "card says float32, graph has tensor\\(uint8\\)",
        ),
        ({"sampling": {**d3.SAMPLING.model_dump(), "frames": 8}}, "axis 1: card says 8, graph has 16"),
        ({"sampling": {**d3.SAMPLING.model_dump(), "height": 32}}, "axis 2: card says 32, graph has 64"),
        ({"output": {"name": "logit", "direction": "higher_is_generated"}}, "card output 'logit' is not in the graph"),
    ],
)
def test_mismatches_with_the_graph_are_named(model_file, changes, message):
    with pytest.raises(CardError, match=message):
        check_card_against_model(_card(**changes), model_file)


def test_a_card_without_a_direction_is_rejected_clearly(tmp_path):
    raw = {**CARD, "output": {"name": "score"}}
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(CardError, match=r"output\.direction: Field required"):
        load_card(path)


def test_direction_negates_native_scores():
    assert list(_card().generated_score(np.array([0.1, 0.3]))) == [-0.1, -0.3]


def test_detectors_add_cli(tmp_path, model_file):
    card = tmp_path / "card.yaml"
    card.write_text(yaml.safe_dump({**CARD, "input": {"name": "wrong"}}))
    cmd = [
        sys.executable,
        "-m",
        "gateway.cli",
        "detectors",
        "add",
        str(model_file),
        "--card",
        str(card),
        "--repo",
        str(tmp_path / "repo"),
    ]
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 1 and "card input 'wrong' is not in the graph" in res.stderr
    card.write_text(yaml.safe_dump(CARD))
    res = subprocess.run(cmd, capture_output=True, text=True)
    assert res.returncode == 0 and "installed d3-user 2.0" in res.stdout


def test_committed_reference_detectors_load_and_match_their_cards():
    installed = list_detectors()
    assert {"npr", "spectral", "restrav_px", "d3_px"} <= set(installed)
    for inst in installed.values():
        check_card_against_model(inst.card, inst.model_path)
        assert "proxy" in inst.card.version or inst.card.training_data.startswith("none")


def test_adding_a_detector_writes_its_own_triton_configs_and_leaves_the_others_alone(tmp_path, model_file):
    """Installing one model used to rewrite every config.pbtxt in the repository (repository <-> triton cycle)."""
    repo = tmp_path / "repo"
    other = repo / "other" / "config.pbtxt"
    other.parent.mkdir(parents=True)
    other.write_text("hand-tuned: keep me\n")
    card = tmp_path / "card.yaml"
    card.write_text(yaml.safe_dump(CARD))
    cmd = [sys.executable, "-m", "gateway.cli", "detectors", "add", str(model_file), "--card", str(card)]
    res = subprocess.run([*cmd, "--repo", str(repo)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert other.read_text() == "hand-tuned: keep me\n"
    folder = repo / CARD["name"]
    for rel in ("config.pbtxt", "configs/cpu.pbtxt", "configs/local.pbtxt"):
        assert f'name: "{CARD["name"]}"' in (folder / rel).read_text()


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
def test_a_card_whose_threshold_is_not_finite_is_refused_at_load(tmp_path, value):
    """Every score row of it would be refused (a threshold is finite), so each of its videos failed as unexpected."""
    text = yaml.safe_dump({**CARD, "threshold": {"value": 0.0, "calibration": "none"}}).replace(
        "value: 0.0", f"value: {value}"
    )
    (tmp_path / "card.yaml").write_text(text)
    with pytest.raises(CardError, match="threshold"):
        load_card(tmp_path / "card.yaml")
