"""The monitor against a real broker (Tansu): two gateway replicas and labels on any partition give exactly
scikit-learn's numbers; a SIGKILL and a restart give the same exported values; a frozen broker makes it
unready without presenting anything as fresh; a real Prometheus server scrapes it and raises the FakeR
collapse alert from the shipped rules."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from sklearn.metrics import recall_score, roc_auc_score

from detectors.serving.processes import free_port, kill_group
from gateway.core.config import GatewayConfig, KafkaSettings
from gateway.core.messages import LabelEvent, VideoEvent
from gateway.monitor.canary import CanaryFeed
from gateway.monitor.config import ComparisonSettings, MonitorConfig, WindowSettings
from gateway.monitor.signals import FAMILIES
from gateway.toolkit import tansu
from tests.support.monitor import (
    FAST_WINDOWS,
    _produce,
    _prom,
    _unique,
    computed_after,
    event,
    prometheus_scraping,
    synthetic,
)
from tests.support.monitor import topics as _topics
from tests.support.streaming import (
    FAST_GROUP,
    metric,
    read_topics,
    require_broker,
    scrape,
    start_gateway,
    start_monitor,
    status,
    stop_process,
    wait_for,
)

ROOT = Path(__file__).resolve().parent.parent


def _windowed(scraped: dict) -> dict:
    """The windowed families of a scrape (the monitor's own counters left out)."""
    return {k: v for k, v in scraped.items() if k.split("{")[0] in FAMILIES}


def _labelled(scraped, name, det, cond) -> float:
    hits = [v for k, v in scraped.items() if k.split("{")[0] == name and f'detector="{det}"' in k
            and f'condition="{cond}"' in k and 'window="time"' in k and 'population="labelled"' in k]  # fmt: skip
    assert len(hits) == 1, (name, det, cond)
    return hits[0]


# -- 1. two gateway replicas, labels on any partition: exactly scikit-learn's numbers ------------------------
def test_two_replicas_and_labels_on_any_partition_give_sklearns_numbers(broker, tmp_path, media):
    k = _topics(broker, "two")
    clips = []
    for name in ("basic", "scene", "odd", "long"):
        clips.append(tmp_path / f"{name}.mp4")
        clips[-1].write_bytes(media[name])
    fields = k.model_dump(exclude={"labels_topic", "group_id", "client_id", *FAST_GROUP})
    gk = KafkaSettings(**fields, group_id="two-gw", **FAST_GROUP)
    cfg = GatewayConfig(
        kafka=gk,
        conditions="original,spatial",
        detectors="d3_px,spectral",
        profile="throughput",
        workers=1,
        http_port=0,
        sources={"file_roots": [str(tmp_path)]},
    )
    replicas = [start_gateway(cfg), start_gateway(cfg)]
    wait_for(lambda: all(gw.consumer.assignment() for gw, _ in replicas), what="both replicas to own a partition")
    mon, mon_thread = start_monitor(MonitorConfig(kafka=k, http_port=0, windows=FAST_WINDOWS))
    truth = {f"v{i}": ("generated" if i % 2 else "real") for i in range(8)}
    labels = [(vid, LabelEvent(video_id=vid, label=lab).model_dump_json().encode()) for vid, lab in truth.items()]
    _produce(k, k.labels_topic, labels[:4], partition=lambda i: (i + 1) % 2)  # before the scores, any partition
    videos = [(vid, VideoEvent(video_id=vid, uri=clips[i % 4].as_uri()).model_dump_json().encode()) for i, vid in
              enumerate(truth)]  # fmt: skip
    _produce(k, k.input_topic, videos)
    manifest = tmp_path / "canaries.jsonl"  # two labelled canaries, sent inline by the canary feed
    manifest.write_text(
        json.dumps({"video_id": "r", "uri": "basic.mp4", "label": "real", "source": "real", "anchor_id": "r"})
        + "\n"
        + json.dumps({"video_id": "g", "uri": "scene.mp4", "label": "generated", "source": "gen", "anchor_id": "r"})
    )
    assert CanaryFeed(gk, manifest, per_second=100.0).run(count=2) == 2
    want = (len(truth) + 2) * 2 * 2
    got = read_topics(k.bootstrap, [k.output_topic, k.input_topic], lambda g: len(_unique(g[k.output_topic])) >= want)
    _produce(k, k.labels_topic, labels[4:], partition=lambda i: i % 2)  # after the scores
    last: list = []

    def joined():
        last.append(s := scrape(mon.port))
        return (
            metric(s, "lastmile_monitor_events_total", outcome="added") == want
            and metric(s, "lastmile_monitor_waiting_labels") == 0
            and metric(s, "lastmile_window_samples", window="time", population="labelled") == len(truth) * 4
            and s
        )

    try:
        scraped = wait_for(joined, what="every score and label joined")
    except AssertionError as exc:  # say what the monitor saw
        raise AssertionError({k: v for k, v in last[-1].items() if "monitor" in k or "samples" in k}) from exc
    events = _unique(got[k.output_topic])
    canaries = {e.video_id for e in events.values() if e.canary}
    assert len(canaries) == 2 and all(v.startswith("canary-") for v in canaries)  # fresh ids, flag carried
    assert metric(scraped, "lastmile_window_samples", window="time", population="canary") == 2 * 4
    events = {key: e for key, e in events.items() if not e.canary}
    assert {gw.metrics.videos.labels("scored")._value.get() > 0 for gw, _ in replicas} == {True}  # both worked
    sent_at = {m.key.decode(): m.timestamp_ms / 1000 for m in got[k.input_topic]}
    assert all(e.event_time == sent_at[e.video_id] and e.schema_version == 2 for e in events.values())
    for det in ("d3_px", "spectral"):
        for cond in ("original", "spatial"):
            rows = [e for e in events.values() if e.detector == det and e.condition == cond]
            y = np.array([truth[e.video_id] == "generated" for e in rows])
            s, d = np.array([e.score for e in rows]), np.array([e.decision for e in rows])
            for name, value in (
                ("lastmile_auc", roc_auc_score(y, s)),
                ("lastmile_fake_recall", recall_score(y, d)),
                ("lastmile_real_recall", recall_score(~y, ~d)),
            ):
                assert _labelled(scraped, name, det, cond) == pytest.approx(value, abs=1e-9), (name, det, cond)
    for gw, thread in replicas:
        gw.stop_event.set()
        thread.join(60)
    mon.stop_event.set()
    mon_thread.join(30)
    assert not mon_thread.is_alive()


# -- 2. SIGKILL and restart: the same values -----------------------------------------------------------------
def test_sigkill_and_restart_export_the_same_values(broker, tmp_path):
    k = _topics(broker, "kill")
    n = synthetic(k, 60, time.time())
    port = free_port()
    config = tmp_path / "monitor.yaml"
    cfg = MonitorConfig(kafka=k, http_port=port, windows=WindowSettings(compute_interval_s=0.2))
    config.write_text(yaml.safe_dump(json.loads(cfg.model_dump_json())))
    cmd = [sys.executable, "-m", "gateway.cli", "monitor", "run", "--config", str(config)]

    def settled():
        wait_for(lambda: status(port, "/readyz") == 200, what="the monitor to be ready")
        wait_for(lambda: metric(scrape(port), "lastmile_monitor_events_total", outcome="added") == n)
        return computed_after(port, time.time())

    first = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        before = settled()
        assert metric(before, "lastmile_monitor_events_total", outcome="duplicate") == n // 10
    finally:
        kill_group(first)
    second = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        after = settled()
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(30) == 0
    assert len(_windowed(before)) > 100 and _windowed(after) == _windowed(before)


def test_compare_on_the_command_line_adds_a_live_comparison_after_the_configs(broker, tmp_path):
    k = _topics(broker, "cli-compare")
    synthetic(k, 40, time.time())
    port = free_port()
    config = tmp_path / "monitor.yaml"
    cfg = MonitorConfig(kafka=k, http_port=port, windows=WindowSettings(compute_interval_s=0.2),
                        comparisons=[ComparisonSettings(champion="d3", challenger="npr", margin=-0.1)])  # fmt: skip
    config.write_text(yaml.safe_dump(json.loads(cfg.model_dump_json())))
    cmd = [sys.executable, "-m", "gateway.cli", "monitor", "run", "--config", str(config), "--compare", "npr:d3"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: status(port, "/readyz") == 200, what="the monitor to be ready")
        got = computed_after(port, time.time())
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    defaults = {name: ComparisonSettings.model_fields[name].default for name in ("margin", "min_samples")}
    for (champion, challenger), margin in ((("d3", "npr"), -0.1), (("npr", "d3"), defaults["margin"])):
        ident = {"champion": champion, "challenger": challenger}
        assert metric(got, "lastmile_comparison_margin", **ident) == margin
        assert metric(got, "lastmile_comparison_min_samples", **ident) == defaults["min_samples"]
        assert metric(got, "lastmile_comparison_videos", **ident, condition="full", window="count") == 40


# -- 3. a frozen broker ---------------------------------------------------------------------------------------
def test_a_frozen_broker_makes_the_monitor_unready_and_nothing_looks_fresh():
    require_broker()
    with tansu.start_broker() as b:
        k = _topics(b, "frozen")
        synthetic(k, 20, time.time())
        mon, thread = start_monitor(MonitorConfig(kafka=k, http_port=0, windows=FAST_WINDOWS))
        before = wait_for(lambda: (s := scrape(mon.port)) and metric(s, "lastmile_window_videos") > 0 and s)
        stop_process(b.process.pid)
        try:
            wait_for(lambda: status(mon.port, "/readyz") == 503, timeout_s=30, what="readyz 503")
            during = scrape(mon.port)
            assert metric(during, "lastmile_runtime_up", component="broker") == 0
            assert status(mon.port, "/healthz") == 200 and thread.is_alive()
            stamps = {k: v for k, v in _windowed(during).items() if "timestamp" in k}
            assert stamps == {k: v for k, v in _windowed(before).items() if "timestamp" in k}  # none advanced
        finally:
            os.kill(b.process.pid, signal.SIGCONT)
        wait_for(lambda: status(mon.port, "/readyz") == 200, timeout_s=60, what="readyz 200 again")
        added = metric(scrape(mon.port), "lastmile_monitor_events_total", outcome="added")
        _produce(k, k.output_topic, [("late", event("late", "original", 1.0, time.time()).model_dump_json()
                                      .encode())])  # fmt: skip
        wait_for(lambda: metric(scrape(mon.port), "lastmile_monitor_events_total", outcome="added") == added + 1)
        mon.stop_event.set()
        thread.join(30)


# -- 4. a real Prometheus server with the shipped rules -------------------------------------------------------
def test_prometheus_scrapes_the_monitor_and_raises_the_faker_collapse_alert(broker, tmp_path):
    k = _topics(broker, "prom")
    synthetic(k, 80, time.time(), collapse="npr", canary=True)  # canaries: labelled without the labels topic
    mon, thread = start_monitor(MonitorConfig(kafka=k, http_port=0, windows=FAST_WINDOWS))
    try:
        with prometheus_scraping(tmp_path, mon.port) as prom_port:

            def collapse_alerts():
                try:
                    alerts = _prom(prom_port, "/api/v1/alerts")["data"]["alerts"]
                except OSError:
                    return None
                return [a for a in alerts if a["labels"]["alertname"] == "LastmileFakeRecallCollapse"]

            alerts = wait_for(collapse_alerts, timeout_s=90, what="the FakeR collapse alert")
            assert {a["state"] for a in alerts} <= {"pending", "firing"}
            assert {(a["labels"]["detector"], a["labels"]["condition"], a["labels"]["population"]) for a in alerts} == {
                ("npr", "full", "canary")
            }
            targets = _prom(prom_port, "/api/v1/targets")["data"]["activeTargets"]
            assert [t["health"] for t in targets] == ["up"]
            recorded = _prom(
                prom_port, "/api/v1/query?query=detector_version_condition_population:lastmile_fake_recall:time"
            )["data"]["result"]
            assert {(r["metric"]["detector"], r["metric"]["condition"]) for r in recorded} >= {
                ("d3", "full"),
                ("npr", "full"),
            }
    finally:  # a skip (no prometheus) or a failed assertion must not leave the monitor running
        mon.stop_event.set()
        thread.join(30)
