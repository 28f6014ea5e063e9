"""Shadow scoring (issue 25): a challenger scores a deterministic share of traffic, chosen by video id as the
sampled fan-out chooses, so the videos that get every condition are scored by it too."""

from __future__ import annotations

import pytest

from gateway.core.config import GatewayConfig, ShadowSettings
from gateway.stream.jobs import fanout, scorers, video_share
from gateway.toolkit import tansu

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


def test_the_gateway_scores_a_shadow_challenger_on_its_share_only(tmp_path):
    """Through a real broker and gateway: the champion scores every video, the challenger (50% shadow share)
    exactly the videos whose id hash is below the share, and nothing else changes."""
    from gateway import bus
    from gateway.core.messages import VideoEvent
    from tests.support.gateway import _config
    from tests.support.media import make_clip
    from tests.support.streaming import read_topics, require_broker, start_gateway

    require_broker()
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(make_clip(tmp_path, "made.mp4"))
    ids = [f"shadow-{i}" for i in range(8)]
    with tansu.start_broker() as broker:
        cfg = _config(broker, tmp_path, "shadow", conditions="original", detectors="d3_px,spectral", workers=1)
        cfg = cfg.model_copy(update={"shadow": ShadowSettings(detectors=["spectral"], share=0.5)})
        cfg = GatewayConfig.model_validate(cfg.model_dump())
        producer = bus.producer(cfg.kafka)
        for vid in ids:
            producer.send_and_wait(
                cfg.kafka.input_topic, VideoEvent(video_id=vid, uri=clip.as_uri()).model_dump_json().encode()
            )
        gw, thread = start_gateway(cfg)
        want = len(ids) + sum(video_share(v) < 0.5 for v in ids)
        got = read_topics(
            cfg.kafka.bootstrap, [cfg.kafka.output_topic], lambda g: len(g[cfg.kafka.output_topic]) >= want
        )
        gw.stop_event.set()
        thread.join(90)
    import json

    events = [json.loads(m.value) for m in got[cfg.kafka.output_topic]]
    by_detector = {d: {e["video_id"] for e in events if e["detector"] == d} for d in ("d3_px", "spectral")}
    assert by_detector["d3_px"] == set(ids) and all(e["score"] is not None for e in events)
    assert by_detector["spectral"] == {v for v in ids if video_share(v) < 0.5}
    assert 0 < len(by_detector["spectral"]) < len(ids)  # the share is neither none nor all of these ids


def test_a_shadow_detector_the_gateway_does_not_run_is_refused_at_start(tmp_path):
    from gateway.stream.service import Gateway
    from transforms.support.config_errors import ConfigError

    cfg = GatewayConfig(conditions="original", detectors="d3_px", shadow={"detectors": ["nope"], "share": 0.5})
    with pytest.raises(ConfigError, match=r"shadow.detectors names detectors the gateway does not run: \['nope'\]"):
        Gateway(cfg).run()


def test_shadow_detectors_naming_every_detector_are_refused_at_start():
    """Videos outside the share would have no detector: the pipeline read that as 'every detector'."""
    from gateway.stream.service import Gateway
    from transforms.support.config_errors import ConfigError

    shadow = {"detectors": ["d3_px", "npr"], "share": 0.5}
    cfg = GatewayConfig(conditions="original", detectors="d3_px,npr", shadow=shadow)
    with pytest.raises(ConfigError, match=r"shadow\.detectors names every detector the gateway runs"):
        Gateway(cfg).run()
