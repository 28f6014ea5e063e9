"""Shadow scoring (issue 25): a challenger scores a deterministic share of traffic, chosen by video id as the
sampled fan-out chooses, so the videos that get every condition are scored by it too."""

from __future__ import annotations

import pytest

from gateway.core.config import GatewayConfig
from gateway.stream.jobs import fanout, scorers, video_share

DETECTORS = ["npr", "npr_next", "d3"]


def test_a_shadow_detector_scores_half_the_videos_and_the_same_ones_every_time():
    ids = [f"video-{i}" for i in range(20_000)]
    chosen = [v for v in ids if "npr_next" in scorers(v, DETECTORS, ["npr_next"], 0.5)]
    assert 0.48 < len(chosen) / len(ids) < 0.52
    assert chosen == [v for v in ids if "npr_next" in scorers(v, DETECTORS, ["npr_next"], 0.5)]
    for v in ids[:200]:
        got = scorers(v, DETECTORS, ["npr_next"], 0.5)
        assert got in (DETECTORS, ["npr", "d3"])  # the champion and the others always, order kept
        assert (got == DETECTORS) == (video_share(v) < 0.5)
    assert all(scorers(v, DETECTORS, [], 0.0) == DETECTORS for v in ids[:100])  # no shadow: every detector
    assert all(scorers(v, DETECTORS, ["d3"], 1.0) == DETECTORS for v in ids[:100])


def test_every_video_with_every_condition_is_also_scored_by_the_challenger():
    names = ["original", "spatial", "full"]
    ids = [f"v{i}" for i in range(5_000)]
    sampled = [v for v in ids if fanout(v, names, "sampled", 0.1) == names]
    assert sampled and all("npr_next" in scorers(v, DETECTORS, ["npr_next"], 0.3) for v in sampled)


def test_the_shadow_share_is_configuration():
    cfg = GatewayConfig(shadow={"detectors": ["npr_next"], "share": 0.5})
    assert cfg.shadow.detectors == ["npr_next"] and cfg.shadow.share == 0.5
    assert GatewayConfig().shadow.detectors == []
    with pytest.raises(ValueError):
        GatewayConfig(shadow={"detectors": ["x"], "share": 1.5})
