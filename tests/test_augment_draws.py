"""The augmentation's draws: a condition per (seed, index, epoch) from the configured distribution, and the frames of
its variant, in this process (another process's draws: tests/test_augment.py)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from detectors.proxy.scenes import SceneSpec, render_video
from transforms.augment import AugmentConfig, Augmenter, Entry, load_augment_config
from transforms.errors import SpecError
from transforms.sampling import SamplingPolicy
from transforms.spec import LASTMILE


@pytest.fixture(scope="module")
def clip() -> bytes:
    return render_video(SceneSpec(width=96, height=72, fps=12, seconds=1.0, seed=5))


def test_a_draw_depends_on_its_key_alone():
    one, two = Augmenter(seed=7), Augmenter(seed=7)
    keys = [(i, e) for i in range(40) for e in range(3)]
    assert [one.draw(i, e).condition.name for i, e in keys] == [two.draw(i, e).condition.name for i, e in keys]
    # another seed, or another epoch of the same index, draws otherwise somewhere
    assert [one.draw(i, 0).condition for i in range(40)] != [Augmenter(seed=8).draw(i, 0).condition for i in range(40)]
    assert [one.draw(i, 0).condition for i in range(40)] != [one.draw(i, 1).condition for i in range(40)]


def test_the_default_draws_the_six_conditions_with_equal_weight():
    augmenter = Augmenter(seed=1)
    names = [augmenter.draw(i, 0).condition.name for i in range(3000)]
    counts = [names.count(c.name) for c in LASTMILE]
    # a goodness-of-fit test against 1/6 each: a wrong weight fails it
    assert stats.chisquare(counts).pvalue > 1e-3, counts


def test_a_sweep_or_chain_splits_its_weight_over_its_conditions():
    cfg = AugmentConfig(
        draws=[
            Entry(condition="original", weight=2),
            Entry(sweep={"base": "spatial", "step": "scale", "param": "factor", "values": [0.75, 0.5]}, weight=1),
            Entry(repost={"base": "full", "hops": 3}, weight=1),
        ]
    )
    got = {c.name: round(p, 6) for c, p in cfg.expanded()}
    assert got == {
        "original": 0.5,
        "spatial@scale.factor=0.75": 0.125,
        "spatial@scale.factor=0.5": 0.125,
        "full^2": 0.125,
        "full^3": 0.125,
    }
    augmenter = Augmenter(cfg, seed=3)
    names = [augmenter.draw(i, 0).condition.name for i in range(2000)]
    observed = [names.count(n) for n in got]
    assert stats.chisquare(observed, [p * 2000 for p in got.values()]).pvalue > 1e-3, observed


def test_frames_are_sampled_as_a_card_says_or_whole(clip):
    augmenter = Augmenter(AugmentConfig(draws=[Entry(condition="spatial")]), seed=0)
    policy = SamplingPolicy(frames=4, height=32, width=32, resize="center_crop")
    sampled, drawn = augmenter.frames(clip, 0, 0, policy)
    assert drawn.condition.name == "spatial" and sampled.shape == (4, 32, 32, 3) and sampled.dtype == np.uint8
    whole, _ = augmenter.frames(clip, 0, 0)
    # every frame, at the variant's own size: spatial halves 96x72
    assert whole.shape == (12, 36, 48, 3)


def test_the_same_key_gives_the_same_frames_and_another_condition_others(clip):
    cfg = AugmentConfig(draws=[Entry(condition="original"), Entry(condition="full")])
    a, b = Augmenter(cfg, seed=2), Augmenter(cfg, seed=2)
    policy = SamplingPolicy(frames=3, height=32, width=32)
    first, drawn = a.frames(clip, 5, 1, policy)
    assert np.array_equal(first, b.frames(clip, 5, 1, policy)[0])
    other = next(e for e in range(20) if a.draw(5, e).condition != drawn.condition)
    assert not np.array_equal(first, a.frames(clip, 5, other, policy)[0])


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ({"draws": [{"condition": "nope"}]}, "unknown condition 'nope'"),
        ({"draws": [{"condition": "full", "repost": {"base": "full", "hops": 2}}]}, "exactly one of"),
        ({"draws": [{"condition": "full", "weight": 0}]}, "weight"),
        ({"profile": "warp"}, "unknown profile 'warp'"),
        ({"draws": []}, "draws"),
    ],
)
def test_a_bad_augmentation_file_is_refused_naming_what_is_wrong(tmp_path, raw, words):
    import yaml

    path = tmp_path / "augment.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(SpecError, match=words):
        load_augment_config(path)


def test_a_negative_key_is_refused():
    with pytest.raises(SpecError, match="index is a non-negative integer"):
        Augmenter().draw(-1, 0)


def test_a_clip_file_over_the_byte_limit_is_refused_by_its_size_before_it_is_read(tmp_path, clip):
    from transforms.errors import LimitExceeded
    from transforms.limits import Limits

    path = tmp_path / "clip.mp4"
    path.write_bytes(clip)
    augmenter = Augmenter(seed=0, limits=Limits(max_bytes=len(clip) - 1))
    # the file's size names it (the engine's own check, on bytes already read, says "input is")
    with pytest.raises(LimitExceeded, match=rf"clip\.mp4 is {len(clip)} bytes; the limit is {len(clip) - 1}"):
        augmenter.frames(path, 0)
