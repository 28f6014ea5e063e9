"""The ``remote`` runtime against a real Open Inference Protocol server (the bundled tritonserver) over HTTP
and gRPC, and a composed detector served by Triton: both equal the embedded runtime."""

from __future__ import annotations

import numpy as np
import pytest

from detectors.card import ModelCard, RemoteSpec
from detectors.errors import CardError, RuntimeUnavailable
from detectors.repository import install, install_remote, list_detectors
from detectors.runtimes import make_runtime
from detectors.runtimes.embedded import EmbeddedRuntime
from detectors.runtimes.remote import RemoteRuntime
from detectors.serving.processes import free_port
from tests.support.triton import _triton


def _remote(card: ModelCard, endpoint: str, **spec) -> ModelCard:
    return card.model_copy(update={"remote": RemoteSpec(endpoint=endpoint, model=card.name, **spec)})


@pytest.fixture(scope="module")
def composed(tmp_path_factory):
    """A user repository holding the five torch contracts of test_compose, each exported and composed."""
    from tests.support.torch_models import CASES, _card, _export, torch

    repo = tmp_path_factory.mktemp("repo")
    models = {}
    for case, (build, inp, out) in CASES.items():
        torch.manual_seed(0)
        model = build().eval()
        _export(model, inp["layout"], repo / f"{case}.onnx")
        card = _card(case, inp, out)
        install(repo / f"{case}.onnx", card, repo / "models")
        models[card.name] = (model, card)
    return repo / "models", models


@pytest.fixture(scope="module")
def server(composed):
    triton = _triton()
    with triton.LocalTriton(repo=composed[0]) as srv:
        yield srv


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_remote_scores_equal_the_embedded_runtime_over_both_protocols(server, composed, protocol):
    port = server.http_port if protocol == "http" else server.grpc_port
    for name, inst in list_detectors(composed[0]).items():
        frames = np.random.default_rng(3).integers(0, 256, inst.card.input_shape(5), dtype=np.uint8)
        runtime = RemoteRuntime(_remote(inst.card, f"{protocol}://127.0.0.1:{port}", max_batch=2))
        got = runtime.score(frames)
        assert runtime.stats.batches == 3  # 5 videos in requests of at most 2
        want = EmbeddedRuntime(inst.model_path, inst.card).score(frames)
        np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-6, err_msg=f"{name} over {protocol}")  # float32 sums


def test_triton_serves_each_composed_contract_as_the_torch_model_scores_it_by_hand(server, composed, media):
    from tests.support.torch_models import H, T, W, _by_hand
    from transforms.sampling import SamplingPolicy, sample_frames

    triton = _triton()
    policy = SamplingPolicy(mode="uniform", frames=T, height=H, width=W)
    frames = np.stack([sample_frames(media[name], policy) for name in ("basic", "scene", "odd")])
    repo, models = composed
    for name, (model, card) in models.items():
        inst = list_detectors(repo)[name]
        got = triton.TritonRuntime(inst.card, server.url).score(frames)
        np.testing.assert_allclose(got, _by_hand(model, card, frames), atol=1e-5, rtol=1e-5, err_msg=name)


def test_a_served_model_that_disagrees_with_its_card_is_refused_naming_each_difference(server):
    card = list_detectors()["npr"].card
    sampling = card.sampling.model_copy(update={"frames": 4, "height": 64})
    wrong = _remote(card.model_copy(update={"sampling": sampling}), f"http://127.0.0.1:{server.http_port}")
    with pytest.raises(CardError) as exc:
        RemoteRuntime(wrong)
    assert "axis 1: the card implies 4, the server serves 8" in str(exc.value)
    assert "axis 2: the card implies 64, the server serves 128" in str(exc.value)
    renamed = card.model_copy(update={"output": card.output.model_copy(update={"name": "logit"})})
    with pytest.raises(CardError, match="the card's output 'logit' is not served"):
        RemoteRuntime(_remote(renamed, f"grpc://127.0.0.1:{server.grpc_port}"))


@pytest.mark.parametrize("scheme", ["http", "grpc"])
def test_a_server_that_is_down_is_unavailable_never_a_verdict(scheme):
    card = _remote(list_detectors()["d3_px"].card, f"{scheme}://127.0.0.1:{free_port()}")
    with pytest.raises(RuntimeUnavailable):
        RemoteRuntime(card, startup_timeout_s=1)


def test_a_replay_with_the_remote_server_down_writes_infra_rows_with_the_endpoint(tmp_path):
    from detectors.proxy.corpus import CorpusConfig, synthesize
    from gateway.batch.replay import ReplayConfig, replay
    from gateway.batch.results import read_results

    endpoint = f"http://127.0.0.1:{free_port()}"
    install_remote(_remote(list_detectors()["d3_px"].card, endpoint).model_copy(update={"name": "d3-remote"}),
                   tmp_path / "models")  # fmt: skip
    assert list_detectors(tmp_path / "models")["d3-remote"].model_sha256 is None
    manifest = synthesize(
        CorpusConfig(anchors=1, seed=57, width=160, height=128, min_seconds=2, max_seconds=2), tmp_path / "c"
    )
    cfg = ReplayConfig(manifest=manifest, conditions="original", detectors="d3-remote", profile="throughput",
                       repo=tmp_path / "models", triton_startup_timeout_s=1)  # fmt: skip
    rows = read_results(replay(cfg, tmp_path / "run", workers=1, progress=False, start_grace_s=3))
    assert len(rows) == 6 and {(r.error_kind, r.score, r.runtime) for r in rows} == {("infra", None, "remote")}
    assert {r.runtime_endpoint for r in rows} == {endpoint}


def test_make_runtime_picks_remote_for_a_remote_card(server):
    inst = list_detectors()["spectral"]
    remote = type(inst)(_remote(inst.card, f"grpc://127.0.0.1:{server.grpc_port}"), inst.model_path, "user")
    runtime = make_runtime(remote, "embedded")
    assert runtime.name == "remote" and runtime.endpoint.startswith("grpc://")


class _Server:
    """A local HTTP server answering every GET with ``reply(path)``: (status, headers, body); it records paths."""

    def __init__(self, reply):
        import http.server
        import threading

        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append(self.path)
                status, headers, body = reply(self.path)
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(body))}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_the_http_client_follows_no_redirect_takes_no_proxy_and_reads_a_bounded_reply(monkeypatch):
    """A redirect would send the frames to another host, an HTTP_PROXY in the environment through one, and a
    reply was read whole whatever its size; each is now refused (the server is then not ready: never a verdict)."""
    from detectors.runtimes import remote

    other = _Server(lambda path: (200, {}, b"{}"))
    redirecting = _Server(lambda path: (307, {"Location": other.url + path}, b""))
    huge = _Server(lambda path: (200, {}, b"[" * (remote.REPLY_BYTES + 10)))
    fine = _Server(lambda path: (200, {}, b"{}"))
    try:
        with pytest.raises(remote.urllib.error.HTTPError, match="307"):
            remote.HttpOIP(redirecting.url, "m", "", 5.0).ready()
        assert other.seen == []  # never asked
        with pytest.raises(remote.ReplyTooLarge, match="more than 16777216 bytes"):
            remote.HttpOIP(huge.url, "m", "", 5.0).ready()
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # no proxy listens there
        monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
        assert remote.HttpOIP(fine.url, "m", "", 5.0).ready() and fine.seen == ["/v2/models/m/ready"]
    finally:
        for server in (other, redirecting, huge, fine):
            server.close()
