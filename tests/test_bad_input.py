"""Every kind of bad input gives its typed error, fast, and never a crash or a hang."""

from __future__ import annotations

import concurrent.futures as cf

import pytest

from tests.support.media import make_clip
from transforms.engine import Engine
from transforms.errors import InvalidVideo, LimitExceeded, UnsupportedVideo, VideoError
from transforms.limits import Limits
from transforms.probe import probe
from transforms.sampling import SamplingPolicy, sample_frames
from transforms.spec import LASTMILE, PROFILES

FAST = PROFILES["throughput"].with_determinism(True)
HANG_BOUND_S = 30  # a generous bound: each case takes well under a second here; this only catches hangs


def _run(data: bytes, limits: Limits | None = None):
    with cf.ThreadPoolExecutor(1) as pool:
        return pool.submit(Engine(FAST, limits).run, data, LASTMILE).result(timeout=HANG_BOUND_S)


def _truncated(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _faststart_truncated(media) -> bytes:
    # moov first, so the header is readable and the frames are missing: caught while decoding
    data = media["faststart"]
    return data[: int(len(data) * 0.6)]


@pytest.mark.parametrize(
    "make, error, match",
    [
        (lambda m: b"", InvalidVideo, "empty input"),
        (lambda m: _truncated(m["basic"]), InvalidVideo, None),
        (_faststart_truncated, InvalidVideo, "truncated|decod"),
        (lambda m: m["image"], UnsupportedVideo, "still image"),
        (lambda m: m["audio_only"], UnsupportedVideo, "no video stream"),
        (lambda m: bytes(range(256)) * 64, InvalidVideo, None),
        (lambda m: b"\x00\x00\x00\x18ftypmp42" + b"\x00" * 5000, InvalidVideo, None),
    ],
    ids=["empty", "truncated", "truncated-faststart", "image", "audio-only", "garbage", "broken-mp4-header"],
)
def test_bad_input_gives_a_typed_error(media, make, error, match):
    with pytest.raises(error, match=match) as info:
        _run(make(media))
    assert isinstance(info.value, VideoError) and str(info.value)


@pytest.mark.parametrize("fraction", [0.3, 0.5, 0.6, 0.8])
def test_a_cut_video_is_refused_in_ffmpegs_words_without_pyavs_errno(media, fraction):
    """A faststart mp4 cut in half was dead-lettered as "decoding failed: [Errno 1094995529] Invalid data found when
    processing input: 'avcodec_send_packet()'": PyAV's error code and function, not a reason for a user."""
    data = media["faststart"]
    with pytest.raises(InvalidVideo) as info:
        _run(data[: int(len(data) * fraction)])
    assert "Errno" not in str(info.value) and "avcodec" not in str(info.value), str(info.value)


def test_a_video_corrupt_past_its_header_is_refused_in_ffmpegs_words_when_sampled(media):
    """The frame sampler (detectors' view of the original) said PyAV's errno and function too; its bytes past the
    first fifth replaced with noise, the header still opens and decoding fails."""
    import random

    from transforms.sampling import SamplingPolicy, sample_frames

    rng = random.Random(1)
    data = bytearray(media["faststart"])
    cut = len(data) // 5
    data[cut:] = bytes(rng.randrange(256) for _ in range(len(data) - cut))
    with pytest.raises(InvalidVideo, match=r"^decoding failed while sampling: \w") as info:
        sample_frames(bytes(data), SamplingPolicy())
    assert "Errno" not in str(info.value) and "avcodec" not in str(info.value), str(info.value)


@pytest.mark.parametrize(
    "limits, match",
    [
        (Limits(max_bytes=1000), "bytes"),
        (Limits(max_pixels=100 * 100), "pixels"),
        (Limits(max_duration_s=1.0), "duration"),
        (Limits(max_frames=10), "frames"),
    ],
)
def test_limits_are_checked_from_the_header_before_decoding(media, limits, match):
    with pytest.raises(LimitExceeded, match=match):
        probe(media["basic"], limits)  # the probe alone refuses it: no frame was decoded
    with pytest.raises(LimitExceeded, match=match):
        _run(media["basic"], limits)


def test_limits_are_enforced_while_decoding_when_the_header_is_silent(media):
    # a raw H.264 elementary stream has no duration or frame count in any header
    info = probe(media["raw_h264"], Limits())
    assert info.frames == 0 or info.duration_s == 0.0 or info.frames > 10
    with pytest.raises(LimitExceeded, match="frames"):
        _run(media["raw_h264"], Limits(max_frames=10))


def test_a_bad_input_does_not_disturb_the_next_one(media):
    engine = Engine(FAST)
    with pytest.raises(VideoError):
        engine.run(b"garbage" * 100, LASTMILE)
    assert set(engine.run(media["basic"], LASTMILE).variants) == {c.name for c in LASTMILE}


@pytest.fixture(scope="module")
def odd_but_valid(tmp_path_factory) -> dict[str, bytes]:
    tmp = tmp_path_factory.mktemp("odd_valid")
    return {
        "animated_gif": make_clip(tmp, "anim.gif", rate="10", seconds="3", vcodec=()),
        "one_frame": make_clip(tmp, "one.mp4", rate="1", seconds="1"),
        "still_gif": make_clip(tmp, "still.gif", rate="1", seconds="1", vcodec=()),
    }


@pytest.mark.parametrize(("name", "frames", "temporal_frames"), [("animated_gif", 30, 24), ("one_frame", 1, 8)])
def test_animated_gifs_and_one_frame_clips_go_through_every_condition(odd_but_valid, name, frames, temporal_frames):
    data = odd_but_valid[name]
    result = _run(data)
    assert set(result.variants) == {c.name for c in LASTMILE}
    for cond, variant in result.variants.items():
        want = temporal_frames if cond in ("temporal", "full") else frames
        assert variant.meta.frames == want, (cond, variant.meta.frames)
        assert variant.meta.duration_s == pytest.approx(probe(data, Limits()).duration_s, abs=0.15)
    policy = SamplingPolicy(frames=4, height=32, width=32)
    assert sample_frames(result.variants["original"].data, policy).shape == (4, 32, 32, 3)


def test_a_still_gif_stays_refused(odd_but_valid):
    with pytest.raises(UnsupportedVideo, match="still image"):
        _run(odd_but_valid["still_gif"])


def _h264(width: int, height: int, frames: int) -> bytes:
    """A raw H.264 stream of ``frames`` frames of ``width`` x ``height``."""
    import io

    import av
    import numpy as np

    buf = io.BytesIO()
    with av.open(buf, "w", format="h264") as out:
        stream = out.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for i in range(frames):
            frame = av.VideoFrame.from_ndarray(np.full((height, width, 3), i * 20 % 255, np.uint8), format="rgb24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode())
    return buf.getvalue()


def test_frames_larger_than_the_header_are_refused_when_only_the_original_is_sampled():
    """A stream whose first frames are small and whose later ones are not: the probe reads the small header,
    and with ``original`` alone no engine decode runs, so the sampler checks every frame it decodes (it used to
    check only the frame count, and decoded 512x512 frames past a 16,384-pixel limit)."""
    from detectors.repository import get_detectors
    from detectors.runtimes.embedded import EmbeddedRuntime
    from gateway.core.messages import VideoItem
    from gateway.scoring.pipeline import Detector, Pipeline

    data, limits = _h264(64, 64, 5) + _h264(512, 512, 10), Limits(max_pixels=64 * 64 * 4)
    assert (probe(data, limits).width, probe(data, limits).height) == (64, 64)
    for policy in ({"mode": "first_k"}, {"mode": "uniform"}, {"mode": "fps_window", "fps": 8.0}):
        with pytest.raises(LimitExceeded, match="a frame of 512x512 exceeds 16384 pixels"):
            sample_frames(data, SamplingPolicy(**policy, frames=16, height=32, width=32), limits)
    inst = get_detectors(["d3_px"])[0]
    original = [c for c in LASTMILE if c.name == "original"]
    pipeline = Pipeline(Engine(FAST, limits), original, [Detector(inst, EmbeddedRuntime(inst.model_path, inst.card))])
    (row,) = pipeline.process(VideoItem(video_id="grows", data=data))
    assert (row.error_kind, row.error_class, row.score) == ("video", "LimitExceeded", None)


@pytest.mark.parametrize(
    "width, height, time, count, error, match",
    [
        (16385, 2, 0.0, 1, UnsupportedVideo, "a frame of 16385x2: a side over 16384 pixels"),
        (4000, 2200, 0.0, 1, LimitExceeded, "a frame of 4000x2200 exceeds 8294400 pixels"),
        (64, 64, 600.5, 1, LimitExceeded, "a frame at 600.5 s exceeds the 600.0 s limit"),
        (64, 64, 1.0, 36_001, LimitExceeded, "more than 36000 frames decoded"),
    ],
)
def test_each_decoded_frame_is_held_to_every_limit(width, height, time, count, error, match):
    from types import SimpleNamespace

    frame = SimpleNamespace(width=width, height=height, time=time)
    with pytest.raises(error, match=match):
        Limits().check_frame(frame, count)
    Limits().check_frame(SimpleNamespace(width=3840, height=2160, time=600.0), 36_000)  # at each limit: fine
