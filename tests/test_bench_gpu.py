"""Issue 26: ``lastmile bench gpu``'s detectors part, on the CPU provider (the rows a GPU provider gets too): the
pipeline's request shape and the embedded runtime's largest batch, each with and without onnxruntime I/O binding,
the bound scores equal to the plain ones, and a reason for each provider this onnxruntime lacks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from detectors.repository import list_detectors
from detectors.runtimes import make_runtime
from detectors.runtimes.base import score_in_batches
from detectors.runtimes.embedded import EmbeddedRuntime
from detectors.runtimes.providers import ORT_NAMES
from gateway.ops import bench_gpu
from gateway.ops.bench_gpu_detectors import MIN_CALLS, PIXEL_LEVELS, bound_infer, detectors
from transforms.spec import LASTMILE

DETECTOR = "d3_px"  # the fastest shipped graph
BINDING_TOLERANCE = 1e-6


def test_the_detectors_part_measures_both_batches_with_and_without_io_binding_on_the_cpu():
    report = detectors(quick=True, names=[DETECTOR])
    request, largest = report["batches"]["request"]["batch"], report["batches"]["max"]["batch"]
    assert request == len(LASTMILE)  # one video's condition variants in one call
    assert largest == make_runtime(list_detectors()[DETECTOR], "embedded").max_batch  # what the gateway's runtime takes
    assert list(report["results"]["cpu"]) == [DETECTOR]
    rows = report["results"]["cpu"][DETECTOR]
    assert sorted((r["batch"], r["io_binding"]) for r in rows) == [
        (request, False),
        (request, True),
        (largest, False),
        (largest, True),
    ]
    for row in rows:
        assert row["provider"] == ORT_NAMES["cpu"]
        assert row["videos_per_s"] > 0 and row["calls"] >= MIN_CALLS
        assert row["frames_per_s"] > row["videos_per_s"]
        if row["io_binding"]:
            assert row["output_device"] == "cpu"
            assert 0 <= row["binding_max_abs_diff"] <= BINDING_TOLERANCE
        else:
            assert "binding_max_abs_diff" not in row
    assert report["settings"]["cpu"]["provider"] == "cpu"
    for label in ("cuda", "tensorrt"):
        if ORT_NAMES[label] not in ort.get_available_providers():
            assert ORT_NAMES[label] in report["skipped"][label]
            assert "not in this onnxruntime build" in report["skipped"][label]
    if ORT_NAMES["tensorrt"] not in ort.get_available_providers():
        assert "tensorrt_engine_cache" not in report


@pytest.mark.parametrize("name", sorted(list_detectors()))
def test_bound_scores_equal_plain_scores_across_batch_sizes(name):
    """A bound output keeps the first call's shape unless bound again: a 16 after a 6 must still score."""
    inst = list_detectors()[name]
    runtime = EmbeddedRuntime(inst.model_path, inst.card)
    infer = bound_infer(runtime.session, inst.card, on_gpu=False, device_id=0)
    rng = np.random.default_rng(1)
    for batch in (len(LASTMILE), runtime.max_batch, len(LASTMILE), 1):
        frames = rng.integers(0, PIXEL_LEVELS, inst.card.input_shape(batch), dtype=np.uint8)
        bound = score_in_batches(inst.card, frames, runtime.max_batch, infer, runtime.stats)
        plain = runtime.score(frames)
        assert bound.shape == (batch,)
        assert np.abs(bound - plain).max() <= BINDING_TOLERANCE


def test_the_check_passes_quick_to_the_detectors_and_writes_their_json(tmp_path: Path, monkeypatch):
    asked: list[bool] = []
    monkeypatch.setattr(bench_gpu, "machine", lambda: {"ffmpeg_cli": None})
    monkeypatch.setattr(bench_gpu, "transforms", lambda inputs, with_floor: {"results": []})
    monkeypatch.setattr(bench_gpu, "detectors", lambda quick: asked.append(quick) or {"quick": quick})
    report = bench_gpu.run_check(tmp_path, {}, quick=True)
    assert asked == [True]
    assert json.loads((tmp_path / "detectors.json").read_text()) == report["detectors"] == {"quick": True}
