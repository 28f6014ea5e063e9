"""Reference detectors: each ONNX graph against its reference implementation, and the methods' own facts."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from detectors.reference import d3, npr, restrav, spectral

RNG = np.random.default_rng(3)


def run_graph(model: onnx.ModelProto, frames: np.ndarray) -> np.ndarray:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(["score"], {"frames": frames})[0]


def frames_for(policy, n: int = 3) -> np.ndarray:
    return RNG.integers(0, 256, (n, policy.frames, policy.height, policy.width, 3), dtype=np.uint8)


def test_d3_graph_matches_reference():
    x = frames_for(d3.SAMPLING)
    np.testing.assert_allclose(run_graph(d3.build_onnx(), x), d3.native_score(x), rtol=1e-5, atol=1e-6)


def test_spectral_graph_matches_reference():
    params = spectral.SpectralParams(RNG.normal(size=300).astype(np.float32) * 20, -3.0)
    x = frames_for(spectral.SAMPLING, 2)
    # float64 inside the graph: agreement to ~1e-6 even with large logistic weights
    np.testing.assert_allclose(
        run_graph(spectral.build_onnx(params), x), spectral.score(x, params), rtol=1e-5, atol=1e-5
    )


def test_restrav_graph_matches_reference():
    r = RNG.normal
    p = restrav.RestravParams(
        r(size=21),
        np.abs(r(size=21)) + 0.5,
        r(size=(21, 64)) * 0.3,
        r(size=64) * 0.1,
        r(size=(64, 32)) * 0.2,
        r(size=32) * 0.1,
        r(size=(32, 1)) * 0.2,
        r(size=1) * 0.1,
    )
    p = restrav.RestravParams(*(np.asarray(v, np.float32) for v in vars(p).values()))
    x = frames_for(restrav.SAMPLING, 2)
    assert restrav.features(x).shape == (2, restrav.N_FEATURES)
    np.testing.assert_allclose(run_graph(restrav.build_onnx(p), x), restrav.score(x, p), rtol=1e-4, atol=1e-4)


def test_npr_graph_matches_the_torch_reference():
    torch = pytest.importorskip("torch", reason="the NPR reference is a torch module (extra 'train')")
    torch.manual_seed(0)
    model = npr.torch_model().eval()
    for mod in model.modules():  # non-trivial batch-norm statistics, so folding is really tested
        if isinstance(mod, torch.nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.2, 0.2)
            mod.running_var.uniform_(0.5, 2.0)
            mod.weight.data.uniform_(0.5, 1.5)
            mod.bias.data.uniform_(-0.2, 0.2)
    state = {k: v.detach().numpy() for k, v in model.state_dict().items()}
    x = frames_for(npr.SAMPLING, 2)
    with torch.no_grad():
        expected = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(run_graph(npr.build_onnx(state), x), expected, rtol=1e-4, atol=1e-5)


def test_npr_residual_is_exactly_zero_on_2x2_block_constant_images():
    blocks = RNG.integers(0, 256, (3, 32, 32)).astype(np.float64)
    image = blocks.repeat(2, axis=1).repeat(2, axis=2)
    assert np.array_equal(npr.npr_residual(image), np.zeros_like(image))
    shifted = np.roll(image, 1, axis=2)  # off the 2x2 grid: no longer zero
    assert np.abs(npr.npr_residual(shifted)).sum() > 0


def test_npr_graph_sees_nothing_in_block_constant_videos():
    state = {k: v for k, v in _random_npr_state().items()}
    model = npr.build_onnx(state)
    s = npr.SAMPLING
    zero_residual = []
    for seed in range(3):
        blocks = np.random.default_rng(seed).integers(
            0, 256, (1, s.frames, s.height // 2, s.width // 2, 3), dtype=np.uint8
        )
        zero_residual.append(blocks.repeat(2, axis=2).repeat(2, axis=3))
    scores = run_graph(model, np.concatenate(zero_residual))
    assert np.ptp(scores) == 0.0  # the residual is zero, so the content cannot matter
    noisy = frames_for(s, 1)
    assert run_graph(model, noisy)[0] != scores[0]


def _random_npr_state() -> dict[str, np.ndarray]:
    shapes = {}
    w = npr.WIDTH

    def conv(name: str, cin: int, cout: int, k: int) -> None:
        shapes[f"{name}.weight"] = RNG.normal(0, 0.2, (cout, cin, k, k)).astype(np.float32)

    def bn(name: str, c: int) -> None:
        shapes[f"{name}.weight"] = np.ones(c, np.float32)
        shapes[f"{name}.bias"] = RNG.normal(0, 0.1, c).astype(np.float32)
        shapes[f"{name}.running_mean"] = np.zeros(c, np.float32)
        shapes[f"{name}.running_var"] = np.ones(c, np.float32)

    conv("conv1", 3, w, 3)
    bn("bn1", w)
    inplanes = w
    for li, (n, planes) in enumerate(zip(npr.BLOCKS, (w, 2 * w), strict=True), start=1):
        for b in range(n):
            p = f"layer{li}.{b}"
            conv(f"{p}.conv1", inplanes, planes, 1)
            bn(f"{p}.bn1", planes)
            conv(f"{p}.conv2", planes, planes, 3)
            bn(f"{p}.bn2", planes)
            conv(f"{p}.conv3", planes, planes * 4, 1)
            bn(f"{p}.bn3", planes * 4)
            if b == 0:
                conv(f"{p}.downsample.0", inplanes, planes * 4, 1)
                bn(f"{p}.downsample.1", planes * 4)
            inplanes = planes * 4
    shapes["fc.weight"] = RNG.normal(0, 0.1, (1, inplanes)).astype(np.float32)
    shapes["fc.bias"] = np.zeros(1, np.float32)
    return shapes


@pytest.mark.parametrize("k", [5, 17, 40])
def test_spectral_profile_of_a_periodic_pattern_peaks_at_its_frequency(k):
    n = 128
    x = np.arange(n)
    grey = 0.5 + 0.4 * np.sin(2 * np.pi * k * x / n)[None, :].repeat(n, axis=0)
    r, counts = spectral.radial_index(n, n)
    mag = 20 * np.log10(np.abs(np.fft.fft2(grey)) + spectral.EPS).reshape(-1)
    profile = np.bincount(r, weights=mag) / counts
    assert int(np.argmax(profile[1:])) + 1 == k  # besides DC, the energy sits at radius k
    resampled = spectral.azimuthal_profile(grey)
    peak = int(np.argmax(resampled[5:])) + 5
    assert abs(peak - k * 299 / (len(counts) - 1)) <= 3


def test_d3_statistic_matches_a_hand_computed_case():
    # flat frames: every embedding entry equals level/255, so ||e_{t+1} - e_t|| = |Δlevel| / 255 * sqrt(768)
    levels = [10, 20, 40, 50, 90, 100, 140, 150, 190, 200, 240, 245, 250, 251, 252, 253]
    frames = np.stack([np.full((64, 64, 3), v, np.uint8) for v in levels])[None]
    d1 = np.abs(np.diff(levels)) / 255 * np.sqrt(768)
    expected = np.std(np.diff(d1))
    assert d3.native_score(frames)[0] == pytest.approx(expected, rel=1e-12)
    assert run_graph(d3.build_onnx(), frames)[0] == pytest.approx(expected, rel=1e-5)
