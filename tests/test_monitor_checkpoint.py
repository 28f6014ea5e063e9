"""Checkpoints of the monitor's store (issue 24): a monitor killed mid-stream comes back from its newest checkpoint,
reads only the tail, and exports every series a monitor that never stopped exports; a damaged or foreign
checkpoint is refused with one log line and the monitor rebuilds from the topics."""

from __future__ import annotations

import json
import logging
import threading
import time

import numpy as np

from detectors.serving.processes import free_port
from gateway import bus
from gateway.core.messages import LabelEvent
from gateway.monitor import checkpoint
from gateway.monitor.config import CheckpointSettings, MonitorConfig, WindowSettings
from gateway.monitor.store import Store
from tests.support.columns import compute
from tests.support.monitor import FAST, NOW, Clock, MonitorProcess, computed_after, event, stream, topics, windowed
from tests.support.streaming import metric, scrape, start_monitor, wait_for


def _filled(settings: WindowSettings) -> Store:
    truth, rows = stream(np.random.default_rng(9), n=150)
    store = Store(settings, Clock(NOW), lambda: NOW - 10)
    for i, row in enumerate(rows):
        store.add_score(row, NOW - 5)
        if i % 5 == 0:
            store.add_label(f"late{i}", "real", NOW - 1)  # still waiting when the checkpoint is written
    for vid, label in list(truth.items())[:100]:
        store.add_label(vid, label, NOW - 3)
    return store


def _samples(store: Store) -> dict:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in compute(store.frame(), store.settings, NOW)}


def test_a_checkpoint_restores_the_store_exactly_and_a_damaged_or_foreign_one_is_refused(tmp_path, caplog):
    cfg = MonitorConfig(windows=WindowSettings(count=40, max_videos=120), checkpoint={"directory": tmp_path})
    store = _filled(cfg.windows)
    store.expire()  # 30 evicted: dead rows travel too
    frame, waiting, counters = store.saved()
    cp = checkpoint.Checkpoint(frame, waiting, counters, {("s", 0): 41, ("l", 1): 7}, {("s", 0): NOW - 4}, NOW - 9, NOW)
    path = checkpoint.write(tmp_path, checkpoint.identity(cfg), cp, keep=2)
    back = checkpoint.newest(tmp_path, checkpoint.identity(cfg))
    restored = Store(cfg.windows, Clock(NOW), lambda: NOW - 10)
    restored.restore(back.frame, back.waiting, back.counters)
    assert _samples(restored) == _samples(store) and len(_samples(store)) > 150
    assert restored.waiting == store.waiting and restored.waiting_count == store.waiting_count > 0
    assert restored.events == store.events and restored.labels == store.labels and restored.held == 120
    assert back.positions == {("s", 0): 41, ("l", 1): 7} and back.seen == {("s", 0): NOW - 4}
    assert back.watermark == NOW - 9
    restored.add_score(event("v149", "original", 3.0, NOW), NOW)  # a held video: a redelivery stays one
    assert restored.events["duplicate"] == store.events["duplicate"] + 1
    assert restored.add_score(event("new", "original", 1.0, NOW), NOW) == "added"  # restored rows grow as any

    meta = json.loads((path / "meta.json").read_text())
    (path / "meta.json").write_text(json.dumps({**meta, "series": meta["series"][:-1]}))  # one series unnamed
    with caplog.at_level(logging.INFO, logger="lastmile.monitor"):
        assert checkpoint.newest(tmp_path, checkpoint.identity(cfg)) is None
    assert "meta.json names" in caplog.text
    (path / "meta.json").write_text(json.dumps(meta))
    caplog.clear()

    foreign = MonitorConfig(windows=WindowSettings(count=40, max_videos=121), checkpoint={"directory": tmp_path})
    with caplog.at_level(logging.INFO, logger="lastmile.monitor"):
        assert checkpoint.newest(tmp_path, checkpoint.identity(foreign)) is None
    assert [r.levelno for r in caplog.records] == [logging.WARNING] and "another configuration" in caplog.text
    caplog.clear()
    data = bytearray((path / "rows.arrow").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (path / "rows.arrow").write_bytes(bytes(data))
    with caplog.at_level(logging.INFO, logger="lastmile.monitor"):
        assert checkpoint.newest(tmp_path, checkpoint.identity(cfg)) is None
    assert len(caplog.records) == 1 and "damaged" in caplog.text and str(path) in caplog.text
    assert not list(tmp_path.glob(".tmp-*"))  # written whole, then renamed


def test_a_monitor_killed_mid_stream_restarts_from_its_checkpoint_with_every_series_equal(broker, tmp_path):
    k, vids = topics(broker, "ckpt"), [f"c{i}" for i in range(600)]
    windows = WindowSettings(seconds=900, stale_after_s=900, label_ttl_s=30, **FAST)
    reference, ref_thread = start_monitor(MonitorConfig(kafka=k, windows=windows, http_port=0))  # never stops
    ckpt = CheckpointSettings(directory=tmp_path / "ckpt", interval_s=0.3)
    cfg = MonitorConfig(kafka=k, windows=windows, checkpoint=ckpt, http_port=free_port())
    mon = MonitorProcess(cfg, tmp_path, log=tmp_path / "monitor.log").start()
    rng, sent = np.random.default_rng(4), []

    def produce() -> None:
        producer = bus.producer(k)
        for i, vid in enumerate(vids):
            y = i % 2
            label = LabelEvent(video_id=vid, label=("real", "generated")[y]).model_dump_json().encode()
            if i % 3 == 0:  # some labels before their scores
                producer.send(k.labels_topic, label, key=vid.encode())
            for det in ("npr", "d3"):
                for cond in ("original", "spatial", "full"):
                    ev = event(vid, cond, float(rng.normal(y)), time.time(), det)
                    producer.send(k.output_topic, ev.model_dump_json().encode(), key=vid.encode())
                    sent.append(1)
            if i % 3:
                producer.send(k.labels_topic, label, key=vid.encode())
            time.sleep(0.015)  # a steady stream over ~10 s: the pacing, not a synchronisation
        producer.flush()
        producer.close()

    feed = threading.Thread(target=produce)
    feed.start()
    wait_for(lambda: metric(scrape(mon.port), "lastmile_monitor_events_total", outcome="added") > len(vids) * 2
             and list(ckpt.directory.glob("ckpt-*")), what="a checkpoint, a third of the way")  # fmt: skip
    assert feed.is_alive()  # mid-stream
    mon.kill()
    mon.start()
    feed.join()
    n = len(sent)
    try:
        for port in (reference.port, mon.port):
            wait_for(lambda p=port: metric(scrape(p), "lastmile_monitor_events_total", outcome="added") == n)
            wait_for(lambda p=port: metric(scrape(p), "lastmile_monitor_waiting_labels") == 0)
            # (no label waiting holds too before the last labels are read: wait for every one joined)
            wait_for(lambda p=port: metric(scrape(p), "lastmile_monitor_labels_total", outcome="joined") >= len(vids))
        t = time.time()
        want, got = computed_after(reference.port, t), computed_after(mon.port, t)
    finally:
        mon.stop()
        reference.stop_event.set()
        ref_thread.join(30)
    assert " loaded in " in (tmp_path / "monitor.log").read_text()  # it came back from a checkpoint
    assert len(windowed(want)) > 100 and windowed(got) == windowed(want)
    assert metric(want, "lastmile_window_samples", window="time", population="labelled") == n
