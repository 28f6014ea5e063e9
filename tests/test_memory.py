"""Bounded memory: the fan-out runs in passes whose encoders fit ``limits.max_encoder_mb``, and a pass changes
no output byte (every encoder sees the same frames in the same order)."""

from __future__ import annotations

import random

import pytest

from transforms.catalog import ConditionFile
from transforms.engine import Engine
from transforms.limits import Limits
from transforms.memory import encoder_memory, split
from transforms.passes import schedule
from transforms.spec import LASTMILE, PROFILES

MB = 2**20


def test_split_places_every_child_once_and_keeps_each_pass_within_the_budget():
    rng = random.Random(3)
    for _ in range(500):
        budget = rng.randint(50, 1000)
        own = rng.randint(0, budget)
        children = [rng.randint(1, budget) for _ in range(rng.randint(1, 8))]
        passes = split(own, children, budget)
        assert sorted(i for p in passes for i in p) == list(range(len(children)))
        assert all(p == sorted(p) and p for p in passes)  # the input order within a pass, no empty pass
        for k, p in enumerate(passes):
            over = (own if k == 0 else 0) + sum(children[i] for i in p) > budget
            assert not over or len(p) == 1 or (k == 0 and own + min(children) > budget)
        if own + sum(children) <= budget:
            assert passes == [list(range(len(children)))]  # one pass when everything fits


def test_split_puts_the_largest_child_that_fits_beside_the_replayable_encoder():
    # the 1080p fidelity fan-out as estimated: VP9 283 MB; three 1080p tails ~433 MB; the 540p subtree 216 MB
    assert split(283, [433, 216, 433, 433], 850) == [[0], [1, 2], [3]]
    assert split(283, [433, 216, 433, 433], 100_000) == [[0, 1, 2, 3]]
    assert split(0, [], 10) == []


def test_the_built_in_profiles_encoders_are_measured_entries():
    table = encoder_memory()
    for profile in PROFILES.values():
        for encoder in ("vp9", "libx264"):
            assert table.frames(encoder, profile) != table.unmeasured, (profile.name, encoder)
    slow = PROFILES["fidelity"].model_copy(update={"x264_preset": "veryslow"})
    assert table.frames("libx264", slow) == table.unmeasured >= max(table.x264.values())
    assert table.encoder_bytes("libx264", PROFILES["fidelity"], 1920 * 1080) == pytest.approx(
        table.x264["medium"] * 1920 * 1080 * 1.5, rel=1e-6
    )


@pytest.mark.parametrize("profile", ["throughput", "fidelity"])
def test_passes_change_no_byte_of_any_variant(media, profile):
    """One pass (no budget) against one encoder subtree per pass (a 1 MB budget): the same bytes, each encoder
    opened once, and the later passes fed by replaying the kept VP9 packets."""
    prof = PROFILES[profile].with_determinism(True)
    one = Engine(prof, Limits(max_encoder_mb=10**6)).run(media["long"], LASTMILE)
    many = Engine(prof, Limits(max_encoder_mb=1)).run(media["long"], LASTMILE)
    assert one.passes == 1 and many.passes == 4  # VP9's children: the h264, scale, fps and badge subtrees
    assert {k: v.meta.sha256 for k, v in many.variants.items()} == {k: v.meta.sha256 for k, v in one.variants.items()}
    assert many.encoder_sessions == one.encoder_sessions == {"libvpx-vp9": 1, "libx264": 5}
    shared = [[s.shared_by for s in r.variants["full"].meta.steps] for r in (one, many)]
    assert shared[0] == shared[1]
    assert many.variants["full"].meta.frames == one.variants["full"].meta.frames


def test_the_default_budget_splits_a_1080p_fidelity_fan_out_and_plans_within_it():
    """Planning only (no encode): the header's size decides the estimate."""
    import collections

    from transforms.probe import ProbeInfo

    info = ProbeInfo("mp4", "h264", 1920, 1080, 30, 10.0, 300, "yuv420p", False, 1)
    engine = Engine(PROFILES["fidelity"])
    root, _ = engine._plan(LASTMILE, info, collections.Counter())
    planned = schedule(root, engine.profile, Limits().max_encoder_mb * MB)
    assert len(root.children[0].passes) == 3 and planned <= Limits().max_encoder_mb * MB
    unbounded = Engine(PROFILES["fidelity"], Limits(max_encoder_mb=10**6))
    root, _ = unbounded._plan(LASTMILE, info, collections.Counter())
    assert schedule(root, unbounded.profile, 10**6 * MB) > 1.5 * Limits().max_encoder_mb * MB  # one pass's worth


def test_a_sweep_over_the_storage_encode_splits_at_the_root_and_decodes_the_input_again(media):
    """Two VP9 storage encodes (a CRF sweep) cannot replay each other: the root's passes decode the input
    once each, with the same bytes as one pass."""
    file = ConditionFile(sweeps=[{"base": "transcode", "step": "vp9", "param": "crf", "values": [24, 40]}])
    conditions = tuple(file.expanded())
    prof = PROFILES["throughput"].with_determinism(True)
    one = Engine(prof, Limits(max_encoder_mb=10**6)).run(media["basic"], conditions)
    many = Engine(prof, Limits(max_encoder_mb=1)).run(media["basic"], conditions)
    assert len(conditions) == 2 and many.passes == 2 and one.passes == 1
    assert {k: v.meta.sha256 for k, v in many.variants.items()} == {k: v.meta.sha256 for k, v in one.variants.items()}


def test_the_benchmark_judges_real_time_and_duration_per_row():
    """The transforms bench's targets (gateway.ops.bench.transforms): each row must meet them, not a mean."""
    from gateway.ops.bench.transforms import _duration_targets, _realtime_targets

    rows = [
        {"input": "generated_720p30_10s", "profile": "throughput", "realtime_factor": 0.9},
        {"input": "bigbuckbunny_720p25", "profile": "fidelity", "realtime_factor": 9.0},  # not 720p30: not judged
        {"input": "generated_720p30_10s", "profile": "fidelity", "realtime_factor": 3.2},
        {"input": "generated_1080p30_10s", "profile": "fidelity", "peak_rss_less_variants_mb": 800.0},
        {"input": "looped_1080p30_60s", "profile": "fidelity", "peak_rss_less_variants_mb": 870.0},
    ]
    assert _realtime_targets(rows) == {
        "realtime_factor <= 1.0 (720p30, throughput)": True,
        "realtime_factor <= 3.0 (720p30, fidelity)": False,
    }
    assert _duration_targets(rows) == {"peak RSS less variants, 60 s <= 1.1 x 10 s (1080p30)": True}
    rows[-1]["peak_rss_less_variants_mb"] = 900.0  # grew by 12.5% with duration
    assert _duration_targets(rows) == {"peak RSS less variants, 60 s <= 1.1 x 10 s (1080p30)": False}
    assert _duration_targets(rows[:2]) == {}  # no 60 s rows: nothing to judge
