"""Detectors behind the real tritonserver that nvidia-pytriton bundles (python backend, CPU)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from detectors.card import ModelCard
from detectors.errors import CardError, RuntimeUnavailable
from detectors.repository import SHIPPED_REPO, list_detectors
from detectors.runtimes.embedded import EmbeddedRuntime
from tests.support.triton import _triton
from transforms.spec import LASTMILE


@pytest.fixture(scope="module")
def server():
    triton = _triton()
    with triton.LocalTriton() as srv:
        yield srv


def test_every_config_parses_with_tritons_protobuf():
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    for name, inst in list_detectors().items():
        folder = SHIPPED_REPO / name
        for path in (folder / "config.pbtxt", folder / "configs" / "cpu.pbtxt", folder / "configs" / "local.pbtxt"):
            config = text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())
            assert config.name == name and config.max_batch_size == 16
            assert config.input[0].name == inst.card.input.name
            assert list(config.input[0].dims) == list(inst.card.input_shape(1)[1:])
            assert config.dynamic_batching.preferred_batch_size == [4, 8, 16]
        production = text_format.Parse((folder / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
        assert production.platform == "onnxruntime_onnx"
        assert production.instance_group[0].kind == model_config_pb2.ModelInstanceGroup.KIND_GPU
        trt = production.optimization.execution_accelerators.gpu_execution_accelerator[0]
        assert trt.name == "tensorrt" and trt.parameters["precision_mode"] == "FP16"
        assert production.dynamic_batching.default_queue_policy.max_queue_size > 0


def test_triton_scores_equal_the_embedded_runtime(server):
    triton = _triton()
    for name, inst in list_detectors().items():
        frames = np.random.default_rng(7).integers(0, 256, inst.card.input_shape(5), dtype=np.uint8)
        remote = triton.TritonRuntime(inst.card, server.url).score(frames)
        local = EmbeddedRuntime(inst.model_path, inst.card).score(frames)
        np.testing.assert_allclose(remote, local, atol=1e-5, rtol=0, err_msg=name)


def test_a_card_that_does_not_match_the_server_fails_fast(server):
    triton = _triton()
    card = list_detectors()["npr"].card
    wrong_name = ModelCard.model_validate({**card.model_dump(), "input": {**card.input.model_dump(), "name": "video"}})
    with pytest.raises(CardError, match=r"input 'video' is not served by Triton \(served inputs: \['frames'\]\)"):
        triton.TritonRuntime(wrong_name, server.url)
    sampling = {**card.sampling.model_dump(), "frames": 4}
    wrong_shape = ModelCard.model_validate({**card.model_dump(), "sampling": sampling})
    with pytest.raises(
        CardError, match=r"frames are \[N, 4, 128, 128, 3\], Triton serves \['-1', '8', '128', '128', '3'\]"
    ):
        triton.TritonRuntime(wrong_shape, server.url)


def test_an_unreachable_server_is_unavailable_not_a_verdict():
    triton = _triton()
    from detectors.serving.processes import free_port

    with pytest.raises(RuntimeUnavailable, match="unavailable"):
        triton.TritonRuntime(list_detectors()["d3_px"].card, f"127.0.0.1:{free_port()}", startup_timeout_s=1)


def test_the_client_recovers_when_the_server_is_killed_mid_run():
    triton = _triton()
    inst = list_detectors()["d3_px"]
    server = triton.LocalTriton().start()
    try:
        client = triton.TritonRuntime(inst.card, server.url, retries=10, backoff_s=0.2, timeout_s=10)
        embedded = EmbeddedRuntime(inst.model_path, inst.card)
        batches = [
            np.random.default_rng(i).integers(0, 256, inst.card.input_shape(2), dtype=np.uint8) for i in range(40)
        ]
        results: list = []
        killed = threading.Event()

        def run() -> None:
            for i, frames in enumerate(batches):
                if i == 10:
                    killed.wait(60)  # the rest is scored across the crash and the restart
                results.append(client.score(frames))

        worker = threading.Thread(target=run)
        worker.start()
        while len(results) < 10:
            worker.join(0.05)
        server.kill()
        killed.set()
        restarted = triton.LocalTriton(
            http_port=server.http_port, grpc_port=server.grpc_port, metrics_port=server.metrics_port
        ).start()
        worker.join(180)
        assert not worker.is_alive() and len(results) == len(batches)
        for frames, got in zip(batches, results, strict=True):  # no wrong score, before or after the crash
            np.testing.assert_allclose(got, embedded.score(frames), atol=1e-5, rtol=0)
        restarted.close()
    finally:
        server.close()


def test_replay_through_triton_equals_the_embedded_replay(server, tmp_path):
    from detectors.proxy.corpus import CorpusConfig, synthesize
    from gateway.batch.replay import ReplayConfig, replay

    manifest = synthesize(
        CorpusConfig(anchors=2, seed=55, width=160, height=128, min_seconds=2, max_seconds=2), tmp_path / "c"
    )
    common = dict(manifest=manifest, conditions="original,spatial", detectors="npr,d3_px", profile="throughput")
    a = pq.read_table(replay(ReplayConfig(**common), tmp_path / "embedded", workers=2, progress=False)).to_pylist()
    b = pq.read_table(
        replay(
            ReplayConfig(**common, runtime="triton", triton_url=server.url),
            tmp_path / "triton",
            workers=2,
            progress=False,
        )
    ).to_pylist()
    assert len(a) == len(b) == 12 * 2 * 2
    for x, y in zip(a, b, strict=True):
        assert (x["video_id"], x["condition"], x["detector"], x["error"]) == (
            y["video_id"],
            y["condition"],
            y["detector"],
            y["error"],
        )
        assert y["runtime"] == "triton" and x["runtime"] == "embedded"
        assert abs(x["score"] - y["score"]) <= 1e-5 and x["decision"] == y["decision"]


def test_bench_triton_writes_the_ratio(tmp_path):
    _triton()
    out = tmp_path / "triton.json"
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "gateway.cli",
            "bench",
            "triton",
            "--detector",
            "d3_px",
            "--seconds",
            "0.5",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["triton_vs_embedded_throughput"] > 0
    assert [r["concurrency"] for r in report["triton"]] == [1, 2, 4, 8]
    # the request shape the pipeline really sends: one video's six LastMile variants per (video, detector) call
    assert report["variants_per_request"] == len(LASTMILE)


def test_tensorrt_says_plainly_when_it_is_absent():
    res = subprocess.run(
        [sys.executable, "-m", "gateway.cli", "triton", "tensorrt", "npr"],
        capture_output=True,
        text=True,
        env={"PATH": str(Path(sys.executable).parent)},
    )
    assert res.returncode == 1 and "TensorRT is not installed here" in res.stderr


def test_a_replay_with_triton_down_writes_infra_rows_and_resume_runs_them_again(tmp_path):
    """No verdict and no aborted run while the scorer is down: infra rows; --resume then scores those videos."""
    triton = _triton()
    from detectors.proxy.corpus import CorpusConfig, synthesize
    from detectors.serving.processes import free_port
    from gateway.batch.replay import ReplayConfig, replay
    from gateway.batch.results import read_results

    manifest = synthesize(
        CorpusConfig(anchors=1, seed=56, width=160, height=128, min_seconds=2, max_seconds=2), tmp_path / "c"
    )
    grpc = free_port()
    cfg = ReplayConfig(
        manifest=manifest,
        conditions="original",
        detectors="d3_px",
        profile="throughput",
        runtime="triton",
        triton_url=f"127.0.0.1:{grpc}",
        triton_startup_timeout_s=1,
    )
    down = read_results(replay(cfg, tmp_path / "run", workers=1, progress=False, start_grace_s=3))
    assert len(down) == 6 and {(r.error_kind, r.score, r.decision) for r in down} == {("infra", None, None)}
    with triton.LocalTriton(grpc_port=grpc):
        up = read_results(replay(cfg, tmp_path / "run", resume=True, workers=1, progress=False))
    assert len(up) == 6 and all(r.error is None and r.score is not None and r.runtime == "triton" for r in up)


def test_errors_map_to_bad_request_or_unavailable_by_status_and_model_readiness():
    """INTERNAL on a ready model is the input's fault (the python backend reports a failing input so), never an
    outage to retry forever; INTERNAL on a model that is not ready, UNAVAILABLE and timeouts are outages."""
    from tritonclient.utils import InferenceServerException

    from detectors.errors import BadRequest
    from detectors.runtimes.triton import classify_error

    def err(status: str):
        return InferenceServerException("model.py raised on this input", status=status)

    assert isinstance(classify_error("m", err("StatusCode.INVALID_ARGUMENT")), BadRequest)
    assert isinstance(classify_error("m", err("StatusCode.INTERNAL"), lambda: True), BadRequest)
    assert isinstance(classify_error("m", err("StatusCode.INTERNAL"), lambda: False), RuntimeUnavailable)
    for status in ("StatusCode.UNAVAILABLE", "StatusCode.DEADLINE_EXCEEDED"):
        assert isinstance(classify_error("m", err(status), lambda: True), RuntimeUnavailable)
