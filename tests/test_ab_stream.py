"""Champion and challenger on live traffic, end to end: two detectors through a real broker and gateway with the
challenger on a 50% shadow share, and a monitor comparing them. Its comparison series equal those computed
offline from the same score events, on the videos both scored only."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from detectors.stats import intervals
from gateway.core.config import GatewayConfig, KafkaSettings
from gateway.core.messages import LabelEvent, VideoEvent
from gateway.monitor.config import MonitorConfig
from gateway.stream.jobs import video_share
from tests.support.monitor import FAST_WINDOWS, _produce, _unique, computed_after
from tests.support.monitor import topics as _topics
from tests.support.streaming import (
    FAST_GROUP,
    metric,
    read_topics,
    scrape,
    start_gateway,
    start_monitor,
    wait_for,
)

CHAMPION, CHALLENGER = "d3_px", "spectral"


def test_the_monitor_compares_a_shadow_challenger_on_the_videos_both_scored(broker, tmp_path, media):
    k = _topics(broker, "ab")
    clips = []
    for name in ("basic", "scene", "odd", "long"):
        clips.append(tmp_path / f"{name}.mp4")
        clips[-1].write_bytes(media[name])
    fields = k.model_dump(exclude={"labels_topic", "group_id", "client_id", *FAST_GROUP})
    cfg = GatewayConfig(
        kafka=KafkaSettings(**fields, group_id="ab-gw", **FAST_GROUP),
        conditions="original,spatial",
        detectors=f"{CHAMPION},{CHALLENGER}",
        shadow={"detectors": [CHALLENGER], "share": 0.5},
        profile="throughput",
        workers=1,
        http_port=0,
        sources={"file_roots": [str(tmp_path)]},
    )
    truth = {f"ab{i}": ("generated" if i % 2 else "real") for i in range(12)}
    shared = {v for v in truth if video_share(v) < 0.5}
    assert 2 <= len(shared) <= 10  # some videos for the challenger, some without it
    gw, gw_thread = start_gateway(cfg)
    comparison = {"champion": CHAMPION, "challenger": CHALLENGER, "min_samples": 4}
    mon, mon_thread = start_monitor(MonitorConfig(kafka=k, http_port=0, windows=FAST_WINDOWS, comparisons=[comparison]))
    try:
        videos = [(v, VideoEvent(video_id=v, uri=clips[i % 4].as_uri()).model_dump_json().encode()) for i, v in
                  enumerate(truth)]  # fmt: skip
        _produce(k, k.input_topic, videos)
        want = 2 * (len(truth) + len(shared))  # two conditions; the challenger on its share only
        got = read_topics(k.bootstrap, [k.output_topic], lambda g: len(_unique(g[k.output_topic])) >= want)
        labels = [(v, LabelEvent(video_id=v, label=lab).model_dump_json().encode()) for v, lab in truth.items()]
        _produce(k, k.labels_topic, labels)
        wait_for(
            lambda: (
                (s := scrape(mon.port))
                and metric(s, "lastmile_monitor_events_total", outcome="added") == want
                and metric(s, "lastmile_monitor_labels_total", outcome="joined") == len(truth)
            ),
            what="every score and label joined",  # (no label waiting is also true before any is read)
        )
        scraped = computed_after(mon.port, time.time())
        events = list(_unique(got[k.output_topic]).values())
        assert {e.video_id for e in events if e.detector == CHALLENGER} == shared

        def column(det: str, cond: str, what: str) -> np.ndarray:
            by_video = {e.video_id: getattr(e, what) for e in events if e.detector == det and e.condition == cond}
            return np.array([by_video[v] for v in sorted(shared)])

        y = np.array([truth[v] == "generated" for v in sorted(shared)])
        want_series = {
            "auc_difference": intervals.auc_difference(
                y, column(CHAMPION, "spatial", "score"), column(CHALLENGER, "spatial", "score")
            ),
            "robustness_difference": intervals.robustness_difference(
                y,
                (column(CHAMPION, "original", "score"), column(CHAMPION, "spatial", "score")),
                (column(CHALLENGER, "original", "score"), column(CHALLENGER, "spatial", "score")),
            ),
        }
        labels_of = {"champion": CHAMPION, "challenger": CHALLENGER, "condition": "spatial", "window": "time"}
        assert metric(scraped, "lastmile_comparison_videos", **labels_of) == len(shared)  # the shared videos only
        assert metric(scraped, "lastmile_comparison_samples", **labels_of) == len(shared)
        disagreement = np.mean(column(CHAMPION, "spatial", "decision") != column(CHALLENGER, "spatial", "decision"))
        assert metric(scraped, "lastmile_comparison_disagreement", **labels_of) == pytest.approx(
            disagreement, abs=1e-12
        )
        for name, (value, lower, upper) in want_series.items():
            for suffix, v in (("", value), ("_lower", lower), ("_upper", upper)):
                got_v = metric(scraped, f"lastmile_comparison_{name}{suffix}", **labels_of)
                assert got_v == pytest.approx(v, abs=1e-9), (name, suffix)
    finally:  # a failed assertion must not leave the gateway and monitor running into later tests
        gw.stop_event.set()
        mon.stop_event.set()
        gw_thread.join(60)
        mon_thread.join(30)
    assert not gw_thread.is_alive() and not mon_thread.is_alive()
    assert json.loads(got[k.output_topic][0].value)["detector"] in (CHAMPION, CHALLENGER)
