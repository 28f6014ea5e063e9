"""Frame sampling picks the frames its policy names, at the size the model card asks."""

from __future__ import annotations

import numpy as np
import pytest

from detectors.proxy.scenes import encode_h264
from transforms.errors import InvalidVideo
from transforms.sampling import SamplingPolicy, count_frames, sample_frames


@pytest.fixture(scope="module")
def counter_video() -> bytes:
    """40 frames at 20 fps; frame i is flat grey at level 5*i + 20 (lossless, so levels survive)."""
    frames = (np.full((48, 64, 3), 5 * i + 20, np.uint8) for i in range(40))
    return encode_h264(frames, fps=20, crf=0, preset="ultrafast")


def _indices(batch: np.ndarray) -> list[int]:
    return [round((float(f.mean()) - 20) / 5) for f in batch]


def test_uniform_spreads_over_the_whole_video(counter_video):
    assert count_frames(counter_video) == 40
    batch = sample_frames(counter_video, SamplingPolicy(frames=5, height=32, width=32))
    assert batch.shape == (5, 32, 32, 3) and batch.dtype == np.uint8
    assert _indices(batch) == np.linspace(0, 39, 5).round().astype(int).tolist()


def test_fps_window_takes_frames_at_the_given_rate(counter_video):
    batch = sample_frames(counter_video, SamplingPolicy(mode="fps_window", fps=5, frames=6, height=16, width=16))
    assert _indices(batch) == [0, 4, 8, 12, 16, 20]  # 20 fps source, every 0.2 s


def test_first_k_and_padding_of_short_videos(counter_video):
    assert _indices(sample_frames(counter_video, SamplingPolicy(mode="first_k", frames=3))) == [0, 1, 2]
    long = sample_frames(counter_video, SamplingPolicy(mode="first_k", frames=50, height=8, width=8))
    assert len(long) == 50 and _indices(long)[39:] == [39] * 11  # the last frame repeats


@pytest.mark.parametrize("resize", ["stretch", "short_side_center_crop", "center_crop"])
def test_resize_rules_give_the_card_size(media, resize):
    batch = sample_frames(media["scene"], SamplingPolicy(frames=2, height=96, width=80, resize=resize))
    assert batch.shape == (2, 96, 80, 3)


def test_center_crop_keeps_native_pixels(media, bikes):
    # bikes is 640x272: a 224 crop must come from native pixels, not a resized frame
    native = sample_frames(bikes, SamplingPolicy(mode="first_k", frames=1, resize="center_crop"))
    stretched = sample_frames(bikes, SamplingPolicy(mode="first_k", frames=1, resize="stretch"))
    hi_native = np.abs(np.diff(native[0].astype(int), axis=1)).mean()
    hi_stretched = np.abs(np.diff(stretched[0].astype(int), axis=1)).mean()
    assert hi_native != pytest.approx(hi_stretched, rel=0.02)


def test_rotated_video_is_sampled_upright(media):
    batch = sample_frames(media["rotated"], SamplingPolicy(frames=1, height=160, width=120, resize="stretch"))
    upright = sample_frames(media["basic"], SamplingPolicy(frames=1, height=120, width=160, resize="stretch"))
    assert batch.shape == (1, 160, 120, 3)
    # the rotated clip is the basic clip turned 90 degrees counter-clockwise for display
    np.testing.assert_allclose(batch[0].astype(float).mean(), upright[0].astype(float).mean(), atol=2)
    assert np.abs(batch[0].astype(int) - np.rot90(upright[0]).astype(int)).mean() < 12


def test_policy_validation_and_bad_input():
    with pytest.raises(ValueError, match="needs 'fps'"):
        SamplingPolicy(mode="fps_window")
    with pytest.raises(InvalidVideo):
        sample_frames(b"nope" * 10, SamplingPolicy())
