"""The engine on real encoded inputs: geometry, the badge, sharing, determinism, and the CLI cross-check."""

from __future__ import annotations

import av
import numpy as np
import pytest

from tests.support.media import decode_gray, psnr
from transforms.engine import Engine
from transforms.ffmpeg_cli import run_condition
from transforms.limits import Limits
from transforms.probe import probe
from transforms.spec import LASTMILE, PROFILES, Condition
from transforms.steps import badge

FAST = PROFILES["throughput"].with_determinism(True)
BY_NAME = {c.name: c for c in LASTMILE}


@pytest.fixture(scope="module")
def scene_variants(media):
    return Engine(FAST).run(media["scene"], LASTMILE)


@pytest.fixture(scope="module")
def carphone_variants(carphone):
    return Engine(FAST).run(carphone, LASTMILE)


def _expect(name, width, height, fps, frames, duration):
    """Expected (codec, w, h, fps, frames, duration) of a LastMile condition for a given source."""
    sw, sh = ((width // 2 + 1) // 2 * 2, (height // 2 + 1) // 2 * 2) if name in ("spatial", "full") else (width, height)
    if name in ("temporal", "full"):
        return sw, sh, 8.0, round(duration * 8), duration
    return sw, sh, fps, frames, duration


@pytest.mark.parametrize("fixture", ["scene_variants", "carphone_variants"])
def test_each_condition_has_the_right_codec_size_fps_frames_and_duration(request, fixture):
    result = request.getfixturevalue(fixture)
    src = result.source
    for name, variant in result.variants.items():
        m = variant.meta
        out = probe(variant.data, Limits())
        assert (out.width, out.height, out.frames) == (m.width, m.height, m.frames)
        if name == "original":
            assert variant.data and m.sha256 == result.input_sha256 and m.codec_chain == [src.codec]
            continue
        assert out.codec == "h264" and out.container.startswith("mov")
        assert m.codec_chain == [src.codec, "libvpx-vp9", "libx264"]
        w, h, fps, frames, duration = _expect(name, src.width, src.height, float(src.fps), src.frames, src.duration_s)
        assert (m.width, m.height) == (w, h), name
        assert m.fps == pytest.approx(fps, rel=1e-3), name
        assert abs(m.frames - frames) <= 1, name
        assert abs(m.duration_s - duration) <= 1 / fps + 1e-6, name  # within one output frame
        assert m.spec_hash and len(m.sha256) == 64 and m.bytes == len(variant.data)
        assert m.steps[0].kind == "normalize" and m.steps[-1].kind == "h264"


def test_vp9_encoder_runs_once_for_all_five_perturbed_conditions(media, monkeypatch):
    opened: list[str] = []
    real_create = av.CodecContext.create

    def counting_create(name, mode=None, *a, **k):
        if mode == "w":
            opened.append(name)
        return real_create(name, mode, *a, **k)

    monkeypatch.setattr(av.CodecContext, "create", counting_create)
    result = Engine(FAST).run(media["basic"], LASTMILE)
    assert opened.count("libvpx-vp9") == 1  # counted where encoders are created, not by the engine
    assert result.encoder_sessions == {"libvpx-vp9": 1, "libx264": 5}
    vp9_steps = {id(s) for v in result.variants.values() for s in v.meta.steps if s.kind == "vp9"}
    assert all(s.shared_by == 5 for v in result.variants.values() for s in v.meta.steps if s.kind == "vp9")
    assert vp9_steps


def test_badge_changes_the_upper_right_and_leaves_the_rest_within_codec_noise(scene_variants):
    pres = decode_gray(scene_variants.variants["presentation"].data)
    plain = decode_gray(scene_variants.variants["transcode"].data)
    h, w = pres.shape[1:]
    patch = badge.badge_patch(BY_NAME["presentation"].steps[1], w, h)
    box = (slice(None), slice(patch.y, patch.y + patch.height), slice(patch.x, patch.x + patch.width))
    assert patch.x + patch.width > w * 0.8 and patch.y < h * 0.1  # upper right
    assert patch.height == pytest.approx(0.12 * h, abs=2)
    assert np.abs(pres[box] - plain[box]).mean() > 30  # the badge is there, opaque
    outside = np.ones(pres.shape, bool)
    outside[:, max(0, patch.y - 16) : patch.y + patch.height + 16, max(0, patch.x - 16) :] = False
    assert psnr(pres[outside], plain[outside]) > 35  # elsewhere only the encoder's noise differs


def test_full_equals_the_chain_of_its_steps(scene_variants, media):
    # 1. sharing the prefix tree changes nothing: every condition alone gives the same bytes
    for cond in LASTMILE[1:]:
        alone = Engine(FAST).run(media["scene"], [cond]).variants[cond.name]
        assert alone.data == scene_variants.variants[cond.name].data, cond.name
    # 2. full = spatial's frames, taken at 8 fps, with the badge: compare outside the badge
    full = decode_gray(scene_variants.variants["full"].data)
    spatial = decode_gray(scene_variants.variants["spatial"].data)
    src_fps = float(scene_variants.source.fps)
    picks = [min(round(i * src_fps / 8), len(spatial) - 1) for i in range(len(full))]
    h, w = full.shape[1:]
    patch = badge.badge_patch(BY_NAME["full"].steps[3], w, h)
    mask = np.ones(full.shape, bool)
    mask[:, : patch.y + patch.height + 8, max(0, patch.x - 8) :] = False
    assert psnr(full[mask], spatial[picks][mask]) > 30
    # 3. a condition listed twice under another name shares the leaf and gives identical bytes
    twin = Condition(name="full-twin", steps=BY_NAME["full"].steps)
    both = Engine(FAST).run(media["scene"], [BY_NAME["full"], twin])
    assert both.variants["full"].data == both.variants["full-twin"].data
    assert both.encoder_sessions["libx264"] == 1


def test_deterministic_output_is_byte_identical(media):
    runs = [Engine(FAST).run(media["basic"], LASTMILE) for _ in range(2)]
    for name in runs[0].variants:
        assert runs[0].variants[name].meta.sha256 == runs[1].variants[name].meta.sha256


@pytest.mark.parametrize("profile", ["throughput", "fidelity"])
def test_pyav_and_ffmpeg_cli_agree(media, profile):
    prof = PROFILES[profile].with_determinism(True)
    ours = Engine(prof).run(media["basic"], LASTMILE)
    for cond in LASTMILE[1:]:
        cli = run_condition(media["basic"], cond, prof)
        a, b = probe(cli, Limits()), ours.variants[cond.name].meta
        assert (a.width, a.height, a.frames) == (b.width, b.height, b.frames), cond.name
        assert float(a.fps) == pytest.approx(b.fps, rel=1e-3)
        # ffmpeg's overlay converts the RGB badge to YUV itself; elsewhere the outputs are (near) bit-exact
        floor = 35 if any(s.kind == "badge" for s in cond.steps) else 40
        assert psnr(decode_gray(cli), decode_gray(ours.variants[cond.name].data)) > floor, cond.name


@pytest.mark.parametrize(
    "clip, size",
    [
        ("odd", (160, 96)),
        ("yuv444", (160, 120)),
        ("10bit", (160, 120)),
        ("vp9_webm", (160, 120)),
        ("rotated", (120, 160)),
    ],
)
def test_awkward_inputs_are_normalised(media, clip, size):
    result = Engine(FAST).run(media[clip], [BY_NAME["transcode"]])
    m = result.variants["transcode"].meta
    assert (m.width, m.height) == size
    with av.open(__import__("io").BytesIO(result.variants["transcode"].data)) as c:
        frame = next(c.decode(video=0))
        assert frame.format.name == "yuv420p" and frame.rotation == 0


def test_rotation_matches_ffmpeg_cli(media):
    ours = Engine(FAST).run(media["rotated"], [BY_NAME["transcode"]]).variants["transcode"].data
    cli = run_condition(media["rotated"], BY_NAME["transcode"], FAST)
    assert psnr(decode_gray(ours), decode_gray(cli)) > 40


def test_variable_frame_rate_keeps_timestamps(media):
    src = probe(media["vfr"], Limits())
    result = Engine(FAST).run(media["vfr"], [BY_NAME["transcode"], BY_NAME["temporal"]])
    assert result.variants["transcode"].meta.frames == src.frames
    for v in result.variants.values():
        assert abs(v.meta.duration_s - src.duration_s) <= 1 / v.meta.fps + 1e-6


_HASHES = """
import json, sys
from transforms.engine import Engine
from transforms.spec import LASTMILE, PROFILES
data = open(sys.argv[1], "rb").read()
engine = Engine(PROFILES[sys.argv[2]].with_determinism(True), concurrent=sys.argv[3] == "concurrent")
print(json.dumps({k: v.meta.sha256 for k, v in engine.run(data, LASTMILE).variants.items()}))
"""


@pytest.mark.parametrize("profile", ["fidelity", "throughput"])
def test_deterministic_variants_are_byte_identical_across_processes_threaded_or_not(tmp_path, media, profile):
    import json
    import subprocess
    import sys

    clip = tmp_path / "clip.mp4"
    clip.write_bytes(media["scene"])
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", _HASHES, str(clip), profile, mode], capture_output=True, text=True, check=True
            ).stdout
        )
        for mode in ("concurrent", "concurrent", "serial")
    ]
    assert runs[0] == runs[1] == runs[2] and len(runs[0]) == 6


def test_a_failure_mid_stream_raises_its_typed_error_and_leaves_no_branch_thread(media):
    import threading

    from transforms.errors import InvalidVideo

    truncated = media["long"][: len(media["long"]) * 2 // 3]
    before = set(threading.enumerate())  # (another test's threads are not this run's branches)
    with pytest.raises(InvalidVideo):
        Engine(PROFILES["throughput"]).run(truncated, LASTMILE)
    assert not [t for t in set(threading.enumerate()) - before if t.name.startswith("lastmile-")]


def test_the_storage_encode_is_decoded_beside_its_encoder(media, monkeypatch):
    """Concurrent: the VP9 decode and the filters below it run on a thread of their own, beside the encoder."""
    import threading

    from transforms.steps import scale

    seen: set[str] = set()
    process = scale.ScaleNode.process

    def recording(self, frame):
        seen.add(threading.current_thread().name)
        return process(self, frame)

    monkeypatch.setattr(scale.ScaleNode, "process", recording)
    serial = Engine(FAST, concurrent=False).run(media["scene"], [BY_NAME["spatial"]])
    assert seen == {threading.current_thread().name}
    seen.clear()
    threaded = Engine(FAST).run(media["scene"], [BY_NAME["spatial"]])
    assert seen == {"lastmile-vp9-decode"}
    assert threaded.variants["spatial"].meta.sha256 == serial.variants["spatial"].meta.sha256
