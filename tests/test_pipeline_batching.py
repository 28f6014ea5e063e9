"""The pipeline scores all of a video's condition variants with one runtime call per detector, split only at
the runtime's maximum batch; a batch refused as a bad request is retried variant by variant, so one bad
variant fails one row. Real engine, real onnxruntime sessions; the runtime below only counts and refuses."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from detectors.errors import BadRequest, NonFiniteScore, RuntimeUnavailable
from detectors.repository import get_detectors
from detectors.runtimes.embedded import EmbeddedRuntime
from gateway.core.messages import VideoItem
from gateway.scoring.pipeline import Detector, Pipeline, score_batched
from transforms.engine import Engine
from transforms.sampling import sample_frames
from transforms.spec import LASTMILE, PROFILES

NAMES = ("d3_px", "restrav_px")


class CountingRuntime(EmbeddedRuntime):
    """The embedded runtime, recording the batch size of every call; it can refuse batches like a server."""

    def __init__(self, inst, max_batch=16, refuse=lambda frames: None):
        super().__init__(inst.model_path, inst.card, max_batch=max_batch)
        self.calls: list[int] = []
        self.refuse = refuse

    def score(self, frames: np.ndarray) -> np.ndarray:
        self.calls.append(len(frames))
        error = self.refuse(frames)
        if error is not None:
            raise error
        return super().score(frames)


def _pipeline(max_batch=16, refuse=lambda frames: None) -> Pipeline:
    engine = Engine(PROFILES["throughput"].with_determinism(True))
    dets = [Detector(i, CountingRuntime(i, max_batch, refuse)) for i in get_detectors(list(NAMES))]
    return Pipeline(engine, LASTMILE, dets)


@pytest.fixture(scope="module")
def video(media) -> VideoItem:
    return VideoItem(video_id="v", data=media["scene"], label="real", source="real", anchor_id="v")


@pytest.fixture(scope="module")
def unbatched(video) -> dict[tuple[str, str], float]:
    """Each variant scored alone, as the pipeline used to: the reference the batched scores must equal."""
    result = Engine(PROFILES["throughput"].with_determinism(True)).run(video.data, LASTMILE)
    out = {}
    for inst in get_detectors(list(NAMES)):
        rt = EmbeddedRuntime(inst.model_path, inst.card)
        for c in LASTMILE:
            frames = sample_frames(result.variants[c.name].data, inst.card.sampling)
            out[(c.name, inst.card.name)] = float(rt.score(frames[None])[0])
    return out


def test_one_call_per_video_and_detector_below_the_maximum_batch(video, unbatched):
    pipeline = _pipeline()
    rows = pipeline.process(video)
    assert [d.runtime.calls for d in pipeline.detectors] == [[len(LASTMILE)]] * len(NAMES)
    assert [(r.condition, r.detector) for r in rows] == [(c.name, n) for c in LASTMILE for n in NAMES]
    for r in rows:
        assert r.error is None and r.score == pytest.approx(unbatched[(r.condition, r.detector)], abs=1e-5)


def test_split_only_at_the_maximum_batch(video):
    pipeline = _pipeline(max_batch=4)
    pipeline.process(video)
    assert [d.runtime.calls for d in pipeline.detectors] == [[4, 2]] * len(NAMES)


def test_a_refused_batch_is_retried_variant_by_variant_and_fails_only_the_bad_variant(video, unbatched):
    result = Engine(PROFILES["throughput"].with_determinism(True)).run(video.data, LASTMILE)
    poisoned = {
        n: hashlib.sha256(sample_frames(result.variants["temporal"].data, i.card.sampling).tobytes()).hexdigest()
        for n, i in zip(NAMES, get_detectors(list(NAMES)), strict=True)
    }

    def refuse(frames: np.ndarray):
        digests = {hashlib.sha256(np.ascontiguousarray(f).tobytes()).hexdigest() for f in frames}
        return BadRequest("this variant cannot be scored") if digests & set(poisoned.values()) else None

    pipeline = _pipeline(refuse=refuse)
    rows = pipeline.process(video)
    n = len(LASTMILE)
    assert [d.runtime.calls for d in pipeline.detectors] == [[n] + [1] * n] * len(NAMES)
    for r in rows:
        if r.condition == "temporal":
            assert (r.error_kind, r.error_class, r.score) == ("video", "BadRequest", None)
        else:
            assert r.error is None and r.score == pytest.approx(unbatched[(r.condition, r.detector)], abs=1e-5)


def test_an_unavailable_runtime_fails_its_rows_as_infrastructure_never_as_verdicts(video):
    pipeline = _pipeline(refuse=lambda frames: RuntimeUnavailable("server restarting"))
    rows = pipeline.process(video)
    assert [d.runtime.calls for d in pipeline.detectors] == [[len(LASTMILE)]] * len(NAMES)
    assert {(r.error_kind, r.score, r.decision) for r in rows} == {("infra", None, None)}


def _log_of_max_less(k: float, tmp_path) -> tuple:
    """A real ONNX graph scoring log(max pixel - k): NaN for a video whose brightest pixel is below ``k``."""
    import onnx
    from onnx import TensorProto, helper

    from detectors.card import ModelCard
    from detectors.reference import d3
    from detectors.repository import install

    shape = ["N", d3.SAMPLING.frames, d3.SAMPLING.height, d3.SAMPLING.width, 3]
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["frames"], ["f"], to=TensorProto.FLOAT),
            helper.make_node("ReduceMax", ["f"], ["m"], axes=[1, 2, 3, 4], keepdims=0),
            helper.make_node("Sub", ["m", "k"], ["d"]),
            helper.make_node("Log", ["d"], ["score"]),
        ],
        "log_of_max_less",
        [helper.make_tensor_value_info("frames", TensorProto.UINT8, shape)],
        [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["N"])],
        [helper.make_tensor("k", TensorProto.FLOAT, [], [k])],
    )
    path = tmp_path / "nan.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    card = ModelCard.model_validate(
        {"name": "nan-maker", "version": "1", "family": "test", "sampling": d3.SAMPLING.model_dump(),
         "input": {"name": "frames", "layout": "NTHWC", "dtype": "uint8"},
         "output": {"name": "score", "direction": "higher_is_generated", "native_score": "log(max - k)"},
         "threshold": {"value": 0.0, "calibration": "none"}, "training_data": "none", "license": "MIT"}
    )  # fmt: skip
    return install(path, card, tmp_path / "repo")


def test_a_nan_from_the_model_fails_that_variant_alone_and_is_never_a_score(tmp_path):
    """The runtime refuses a batch with a NaN score (a BadRequest), so the pipeline scores its variants one by
    one: the dark one gets a NonFiniteScore error row of the video's, the bright ones their scores. A NaN used to
    pass as a score: a 'scored' event with no score, and a replay whose report failed on it."""
    inst = _log_of_max_less(128.0, tmp_path)
    runtime = EmbeddedRuntime(inst.model_path, inst.card)
    frames = [np.full(inst.card.input_shape(1)[1:], v, np.uint8) for v in (255, 0, 200)]
    with pytest.raises(NonFiniteScore, match="nan-maker: the model scored nan"):
        runtime.score(np.stack(frames))
    (bright, _), (dark, _), (grey, _) = score_batched(runtime, frames)
    assert isinstance(dark, NonFiniteScore)
    assert (bright, grey) == (pytest.approx(np.log(127.0)), pytest.approx(np.log(72.0)))


def test_a_detector_scoring_nan_gets_error_rows_and_the_others_their_scores(video, tmp_path, unbatched):
    inst = _log_of_max_less(300.0, tmp_path)  # no pixel reaches 300: NaN for every variant
    engine = Engine(PROFILES["throughput"].with_determinism(True))
    d3_px = get_detectors(["d3_px"])[0]
    dets = [
        Detector(d3_px, EmbeddedRuntime(d3_px.model_path, d3_px.card)),
        Detector(inst, EmbeddedRuntime(inst.model_path, inst.card)),
    ]
    rows = Pipeline(engine, LASTMILE, dets).process(video)
    for r in rows:
        if r.detector == "nan-maker":
            assert (r.error_kind, r.error_class, r.score, r.decision) == ("video", "NonFiniteScore", None, None)
        else:
            assert r.error is None and r.score == pytest.approx(unbatched[(r.condition, "d3_px")], abs=1e-5)
    assert len(rows) == 2 * len(LASTMILE)
