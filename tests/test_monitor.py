"""The monitor's windows and signals, without a broker: exact against scikit-learn, numpy and scipy on the
same rows; event-time expiry whatever order labels arrive in; stale series leave; duplicates count once."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import ks_2samp
from sklearn.metrics import balanced_accuracy_score, recall_score, roc_auc_score

from detectors.stats.intervals import wilson_interval
from gateway.monitor.config import WindowSettings
from gateway.monitor.store import Store
from tests.support.columns import compute
from tests.support.monitor import NOW, Clock, event, stream


def values(samples, name, **labels) -> dict:
    out = {}
    for s in samples:
        if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
            out[(s.labels["detector"], s.labels["condition"])] = s.value
    return out


def test_windowed_metrics_equal_sklearn_on_deduplicated_rows_whatever_the_label_order():
    rng = np.random.default_rng(3)
    truth, rows = stream(rng)
    store = Store(WindowSettings(count=100), Clock())
    labels = list(truth.items())
    for i, row in enumerate(rows):  # labels interleaved: some before their scores, some after
        assert store.add_score(row, 0.0) in ("added", "duplicate")
        if i % 3 == 0 and labels:
            vid, label = labels.pop(rng.integers(len(labels)))
            store.add_label(vid, label, NOW)
    for vid, label in labels:
        store.add_label(vid, label, NOW)
    assert store.events["duplicate"] == 100 and not store.waiting
    samples = compute(store.frame(), store.settings, NOW)
    assert _by_key(samples) == _by_key(compute(store.snapshot(), store.settings, NOW))
    unique = {r.idempotency_key: r for r in rows}.values()
    for det in ("npr", "d3"):
        for cond in ("original", "full"):
            sel = sorted((r for r in unique if r.detector == det and r.condition == cond), key=lambda r: r.event_time)
            for window, part in (("time", sel), ("count", sel[-100:])):
                y = np.array([truth[r.video_id] == "generated" for r in part])
                s, d = np.array([r.score for r in part]), np.array([r.decision for r in part])
                want = {
                    "lastmile_auc": roc_auc_score(y, s),
                    "lastmile_fake_recall": recall_score(y, d),
                    "lastmile_real_recall": recall_score(~y, ~d),
                    "lastmile_balanced_accuracy": balanced_accuracy_score(y, d),
                }
                for name, value in want.items():
                    got = values(samples, name, window=window, population="labelled")[(det, cond)]
                    assert got == pytest.approx(value, abs=1e-9), (name, det, cond, window)
            if cond == "full":
                orig = {r.video_id: r for r in unique if r.detector == det and r.condition == "original"}
                y = np.array([truth[r.video_id] == "generated" for r in sel])
                a, b = np.array([r.score for r in sel]), np.array([orig[r.video_id].score for r in sel])
                drift = values(samples, "lastmile_auc_drift", window="time", population="labelled")[(det, cond)]
                assert drift == pytest.approx(roc_auc_score(y, a) - roc_auc_score(y, b), abs=1e-9)


def _by_key(samples) -> dict:
    out = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}
    assert len(out) == len(samples)
    return out


def test_the_columnar_computation_equals_the_from_scratch_one_exactly():
    """The store's frame (columns, slots, compaction) against the plain per-video snapshot of the same store, at
    every step of a stream with canaries, unknown labels, equal event times, expiry and eviction by the bound."""
    rng = np.random.default_rng(11)
    clock = Clock(NOW)
    store = Store(WindowSettings(seconds=400, count=30, max_videos=150, stale_after_s=400), clock)
    checked = 0
    for step in range(6):
        for i in range(step * 100, step * 100 + 100):
            t = NOW + step * 100 - 300 + (i % 50) * 2  # pairs of videos share an event time
            y = rng.random() < 0.5
            for det in ("npr", "d3"):
                for cond in ("original", "spatial", "full")[: 1 + i % 3]:
                    label = ("real", "generated")[y] if i % 4 == 0 else None
                    store.add_score(event(f"v{i}", cond, float(rng.normal(y)), t, det, label, canary=i % 7 == 0), t)
            if i % 4 == 1:
                store.add_label(f"v{i}", ("real", "generated")[y], t)
        clock.t = NOW + step * 100
        store.expire()
        got, want = compute(store.frame(), store.settings, clock.t), compute(store.snapshot(), store.settings, clock.t)
        assert _by_key(got) == _by_key(want)
        checked += len(got)
    assert store.events["video_evicted"] > 0 and store.events["video_expired"] > 0 and checked > 2000
    assert store.table.n <= 2 * store.held and store.table.n < 600  # dead rows were compacted away


def test_label_free_signals_equal_numpy_and_scipy():
    rng = np.random.default_rng(4)
    _truth, rows = stream(rng, n=200, dets=("npr",))
    store = Store(WindowSettings(count=50), Clock())
    for row in rows:
        store.add_score(row, 0.0)
    samples = compute(store.snapshot(), store.settings, NOW)
    unique = list({r.idempotency_key: r for r in rows}.values())
    orig = {r.video_id: r for r in unique if r.condition == "original"}
    full = sorted((r for r in unique if r.condition == "full"), key=lambda r: r.event_time)
    for window, part in (("time", full), ("count", full[-50:])):
        a = np.array([r.score for r in part])
        b = np.array([orig[r.video_id].score for r in part])
        da = np.array([r.decision for r in part])
        db = np.array([orig[r.video_id].decision for r in part])
        lab = {"window": window, "population": "traffic"}
        assert values(samples, "lastmile_score_shift_mean", **lab)[("npr", "full")] == pytest.approx(np.mean(a - b))
        ks = values(samples, "lastmile_score_ks_statistic", **lab)[("npr", "full")]
        assert ks == pytest.approx(ks_2samp(a, b).statistic, abs=1e-12)
        r2g = values(samples, "lastmile_flip_rate", direction="real_to_generated", **lab)[("npr", "full")]
        g2r = values(samples, "lastmile_flip_rate", direction="generated_to_real", **lab)[("npr", "full")]
        assert r2g == pytest.approx(np.mean(da[~db])) and g2r == pytest.approx(np.mean(~da[db]))
        for direction, flipped, n in (("real_to_generated", da[~db].sum(), (~db).sum()), ("generated_to_real",
                                      (~da[db]).sum(), db.sum())):  # fmt: skip
            bounds = [values(samples, f"lastmile_flip_rate_{b}", direction=direction, **lab)[("npr", "full")]
                      for b in ("lower", "upper")]  # fmt: skip
            assert bounds == pytest.approx(list(wilson_interval(int(flipped), int(n))[1:]))  # a proportion's interval
        assert values(samples, "lastmile_paired_videos", **lab)[("npr", "full")] == len(part)
        for cond, rows_here in (("full", part), ("original", sorted(orig.values(), key=lambda r: r.event_time))):
            rows_here = rows_here if window == "time" else rows_here[-50:]
            called = np.array([r.decision for r in rows_here])  # a threshold that does not fit shows here, unlabelled
            rate = values(samples, "lastmile_generated_rate", **lab)[("npr", cond)]
            bounds = [values(samples, f"lastmile_generated_rate_{b}", **lab)[("npr", cond)] for b in ("lower", "upper")]
            assert rate == pytest.approx(called.mean()) and 0 < called.mean() < 1
            assert bounds == pytest.approx(list(wilson_interval(int(called.sum()), called.size)[1:]))
    assert not values(samples, "lastmile_auc")  # no label anywhere: no labelled series at all


def test_expiry_is_by_the_scores_event_time_even_for_late_labels():
    clock = Clock()
    store = Store(WindowSettings(seconds=600, stale_after_s=3600, label_ttl_s=7200), clock)
    for i in range(10):  # video i scored at NOW - 100 * i
        for cond, s in (("original", float(i)), ("full", float(-i))):
            store.add_score(event(f"v{i}", cond, s, NOW - 100 * i), 0.0)
    for i in reversed(range(10)):  # labels arrive late and out of order, all now
        store.add_label(f"v{i}", "generated" if i % 2 else "real", NOW)
    clock.t = NOW + 250  # the window now holds videos with event time >= NOW - 350: v0..v3
    snap = store.snapshot()
    assert [vid for vid, _ in snap] == ["v3", "v2", "v1", "v0"]
    samples = compute(snap, store.settings, clock.t)
    n = values(samples, "lastmile_window_samples", window="time", population="labelled", label="generated")
    assert n[("npr", "original")] == 2  # v1, v3
    # v7-v9 were scored before the window (NOW - 600) began: their scores were refused, their labels wait
    assert store.events["expired"] == 6 and set(store.waiting) == {"v7", "v8", "v9"}
    clock.t = NOW + 7201  # ... until their TTL, counted from the label's own time
    store.expire()
    assert not store.waiting and store.labels["expired"] == 3 and not store.videos


def test_a_series_without_a_new_sample_for_stale_after_s_leaves_and_a_redelivery_counts_once():
    clock = Clock()
    settings = WindowSettings(seconds=3600, stale_after_s=300, count=10)
    store = Store(settings, clock)
    for i in range(6):
        for det in ("npr", "d3"):
            store.add_score(event(f"v{i}", "original", float(i), NOW - 10, det, label=("real", "generated")[i % 2]), 0)
    store.add_score(event("v6", "original", 5.0, NOW + 200, "npr", label="generated"), 0)  # npr keeps going
    assert store.add_score(event("v6", "original", 9.0, NOW + 200, "npr", label="generated"), 0) == "duplicate"
    clock.t = NOW + 400  # d3's latest sample is 410 s old, npr's 200 s
    samples = compute(store.snapshot(), settings, clock.t)
    stamps = values(samples, "lastmile_window_last_sample_timestamp_seconds", population="labelled")
    assert stamps == {("npr", "original"): NOW + 200}
    assert set(values(samples, "lastmile_auc")) == {("npr", "original")}
    n = values(samples, "lastmile_window_samples", window="count", population="labelled", label="generated")
    assert n == {("npr", "original"): 4}  # v1, v3, v5 and v6 once, with its first score


def test_canaries_are_their_own_population():
    store = Store(WindowSettings(), Clock())
    for i in range(8):
        label = ("real", "generated")[i % 2]
        store.add_score(event(f"c{i}", "original", float(i % 2), NOW, label=label, canary=True), 0)
        store.add_score(event(f"t{i}", "original", float(i), NOW), 0)
    samples = compute(store.snapshot(), store.settings, NOW)
    assert values(samples, "lastmile_auc", population="canary", window="time") == {("npr", "original"): 1.0}
    assert not values(samples, "lastmile_auc", population="labelled")
    assert values(samples, "lastmile_window_videos", population="traffic", window="time")[("npr", "original")] == 8


def test_canary_messages_carry_a_fresh_id_the_label_and_the_flag(tmp_path):
    from gateway.core.config import KafkaSettings
    from gateway.core.messages import VideoEvent, parse_video_message
    from gateway.monitor.canary import CanaryError, CanaryFeed, parse_rate

    assert parse_rate("6/min") == pytest.approx(0.1) and parse_rate("2/s") == 2.0 and parse_rate("36/h") == 0.01
    for bad in ("6", "0/min", "fast", "-1/s"):
        with pytest.raises(CanaryError):
            parse_rate(bad)
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "a.mp4").write_bytes(b"\x00" * 2000)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"video_id": "a", "uri": "v/a.mp4", "label": "real", "source": "real", "anchor_id": "a"}\n')
    feed = CanaryFeed(KafkaSettings(), manifest, 1.0)
    one, two = feed.message(feed.rows()[0]), feed.message(feed.rows()[0])
    event, inline = parse_video_message(one.value, one.headers)
    assert inline == b"\x00" * 2000 and event.canary and event.label == "real" and event.source == "real"
    assert one.key != two.key and event.video_id.startswith("canary-a-")
    by_ref = CanaryFeed(KafkaSettings(), manifest, 1.0, inline=False).message(feed.rows()[0])
    ref = VideoEvent.model_validate_json(by_ref.value)
    assert ref.canary and ref.uri == (tmp_path / "v" / "a.mp4").resolve().as_uri() and by_ref.headers is None
    with pytest.raises(CanaryError, match="by reference"):
        CanaryFeed(KafkaSettings(max_message_bytes=1024), manifest, 1.0).message(feed.rows()[0])
    elsewhere = feed.rows()[0].model_copy(update={"uri": "file://videos/a.mp4"})  # the gateway's refusal, said first
    with pytest.raises(CanaryError, match=r"names host .videos. \(a local file: .*\) \(.*m\.jsonl, video a\)"):
        feed.message(elsewhere)


def test_windowed_series_are_withheld_until_the_windows_are_rebuilt():
    from prometheus_client import generate_latest

    from gateway.monitor.exporter import MonitorMetrics

    store = Store(WindowSettings(), Clock())
    for i in range(6):
        store.add_score(event(f"v{i}", "original", float(i), NOW, label=("real", "generated")[i % 2]), 0)
    ready = {"now": False}
    metrics = MonitorMetrics(store, store.settings, Clock(), lambda: ready["now"])
    page = generate_latest(metrics.registry).decode()
    assert "\nlastmile_auc{" not in page and "lastmile_monitor_events_total{" in page  # operational series stay
    ready["now"] = True
    assert "\nlastmile_auc{" in generate_latest(metrics.registry).decode()


def test_a_scrape_never_waits_for_the_stores_lock_and_shows_its_last_change():
    """An ingest step holds the store's lock (at a million videos, growing every series' arrays held it 0.1-0.9 s,
    and a scrape waited for it: the slowest scrapes while ingesting); a scrape reads the store's last published
    tally instead, so it answers while the lock is held, with the counts as of the last change."""
    import threading

    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from gateway.monitor.exporter import MonitorMetrics

    store = Store(WindowSettings(), Clock())
    for i in range(4):
        store.add_score(event(f"v{i}", "original", float(i), NOW), 0)
    store.add_score(event("v0", "original", 0.0, NOW), 0)  # a redelivery
    store.add_label("w9", "real", NOW)  # waits for its video
    metrics = MonitorMetrics(store, store.settings, Clock(), lambda: True)
    metrics.windows.refresh()  # a running monitor's scrape serves its latest computation
    pages: list[bytes] = []
    with store.lock:  # as an ingest step holds it
        scraper = threading.Thread(target=lambda: pages.append(generate_latest(metrics.registry)), daemon=True)
        scraper.start()
        scraper.join(timeout=30)
        assert pages, "the scrape waited for the store's lock"
    got = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(pages[0].decode())
        for s in fam.samples
    }
    assert got[("lastmile_monitor_events_total", (("outcome", "added"),))] == 4
    assert got[("lastmile_monitor_events_total", (("outcome", "duplicate"),))] == 1
    assert got[("lastmile_monitor_labels_total", (("outcome", "waiting"),))] == 1
    assert got[("lastmile_monitor_videos", ())] == 4 and got[("lastmile_monitor_waiting_labels", ())] == 1


def test_grown_arrays_keep_their_rows_and_fill_the_new_ones():
    from gateway.monitor.table import VIDEO_COLUMNS, Videos

    table = Videos()
    for i in range(3000):  # past START twice: two growths
        table.append_video(f"v{i}", float(i), float(i) + 0.5, i % 3 == 0, i % 2)
    c = table.cols
    n = table.n
    assert len(c["alive"]) > n  # room left: the new rows hold each column's fill
    for name, (_, fill) in VIDEO_COLUMNS.items():
        tail = c[name][n:]
        assert np.isnan(tail).all() if np.isnan(fill) else (tail == fill).all(), name
    assert c["event_time"][:n].tolist() == [float(i) for i in range(n)]
    assert c["first_seen"][:n].tolist() == [float(i) + 0.5 for i in range(n)]
    assert c["canary"][:n].tolist() == [i % 3 == 0 for i in range(n)]
    assert c["row_label"][:n].tolist() == [i % 2 for i in range(n)] and c["alive"][:n].all()
    assert np.isnan(c["topic_time"][:n]).all() and (c["topic_label"][:n] == -1).all()


def test_the_bound_on_videos_held_evicts_the_oldest_and_counts_them():
    store = Store(WindowSettings(max_videos=10, count=2), Clock())
    for i in range(12):
        store.add_score(event(f"v{i}", "original", float(i), NOW - 100 + i), 0)
    assert len(store.videos) == 10 and store.events["video_evicted"] == 2 and "v0" not in store.videos


def test_kafka_python_checks_record_crcs_with_the_c_crc32c():
    """A dependency: kafka-python's pure-Python CRC32C ran at ~7 MB/s here and took most of the monitor's ingest;
    with the `crc32c` package installed it uses the C one (over 1,000 times faster)."""
    import crc32c
    from kafka.record import util

    assert util._crc32c is crc32c.crc32c


def test_eviction_picks_the_oldest_by_time_then_slot_as_a_full_sort_does():
    from gateway.monitor.table import oldest

    rng = np.random.default_rng(5)
    for trial in range(500):
        n = int(rng.integers(1, 80))
        slots = np.sort(rng.choice(300, n, replace=False))
        times = rng.integers(0, 5, n).astype(float)  # many equal times: the slot breaks the tie
        if trial % 4 == 0:
            times[rng.random(n) < 0.3] = np.nan
        k = int(rng.integers(1, n + 2))
        assert sorted(oldest(slots, times, k).tolist()) == sorted(slots[np.lexsort((slots, times))[:k]].tolist())


def test_a_frame_keeps_its_values_while_the_store_takes_labels_evicts_and_compacts():
    """A frame views the columns written once (event time, first timestamp, canary) and copies the others: what
    the store does after it is taken (labels joining, evictions, a compaction that renumbers) changes nothing in a
    computation from it."""
    clock = Clock(NOW)
    store = Store(WindowSettings(seconds=400, count=30, max_videos=40, stale_after_s=400), clock)
    for i in range(40):
        for cond in ("original", "full"):
            store.add_score(event(f"v{i}", cond, float(i % 7) - 3, NOW - 200 + i, label=None), NOW - 200 + i)
    for i in range(0, 40, 2):
        store.add_label(f"v{i}", ("real", "generated")[i % 4 == 0], NOW - 200 + i)
    frame = store.frame()
    before = _by_key(compute(frame, store.settings, NOW))
    for i in range(1, 40, 2):  # the other half labelled now
        store.add_label(f"v{i}", "generated", NOW - 200 + i)
    for i in range(40, 100):  # 60 newer videos: the 40 before are evicted, and the table compacted
        store.add_score(event(f"v{i}", "original", 1.0, NOW - 100 + i, canary=True), NOW - 100 + i)
        store.expire()
    assert store.events["video_evicted"] >= 40 and store.table.n < 100  # compacted
    assert _by_key(compute(frame, store.settings, NOW)) == before


def test_a_large_arrays_growth_leaves_at_most_an_eighth_of_slack():
    from gateway.monitor.table import LARGE, START, capacity

    rows, sizes = START, []
    while rows < 3 * LARGE:
        rows = capacity(rows, rows + 1)
        sizes.append(rows)
    assert sizes[0] == START * 3 // 2  # small arrays grow by half
    for before, after in itertools.pairwise(sizes):
        assert after > before and (after <= LARGE or after <= max(LARGE, before * 1.125))
    assert capacity(1_008_895, 1_008_896) == int(1_008_895 * 1.125)  # not 1.5M: just under a million rows
    assert capacity(100, 5000) == 5000  # at least what is asked for


def test_decisions_at_two_thresholds_are_two_series_never_one():
    """A detector recalibrated while the monitor runs: its events before carry the card's threshold, those after the
    calibration's id; each threshold's decisions are a series of their own (the version label says which)."""
    store = Store(WindowSettings(count=100), Clock())
    for i in range(20):
        label = "generated" if i % 2 else "real"
        before = event(f"v{i}", "original", float(i % 2) + 0.1 * i, NOW - 60 + i, label=label)
        recalibrated = {"threshold": 1.5, "decision": before.score >= 1.5, "threshold_id": "cal-0a1b"}
        assert store.add_score(before.model_copy(update={"threshold_id": "card"}), 0.0) == "added"
        assert store.add_score(before.model_copy(update=recalibrated), 0.0) == "added"  # (another threshold)
    samples = compute(store.frame(), store.settings, NOW)
    recall = {
        s.labels["version"]: s.value
        for s in samples
        if s.name == "lastmile_fake_recall" and s.labels["window"] == "count" and s.labels["condition"] == "original"
    }
    assert set(recall) == {"1", "1+cal-0a1b"}
    assert recall["1"] != recall["1+cal-0a1b"]  # decided at 0 and at 1.5: apart, as they were made


def test_a_comparison_pinned_to_a_version_follows_its_recalibration():
    """`npr@1` in a comparison: after a calibration npr's events count under `1+cal-...`; the comparison reads that
    series (the newest of the version and its recalibrations), not nothing."""
    from gateway.monitor.comparisons import resolve
    from gateway.monitor.signals import FrameColumns

    store = Store(WindowSettings(count=100), Clock())
    for i in range(4):
        old = event(f"v{i}", "original", 1.0, NOW - 50 + i).model_copy(update={"threshold_id": "card"})
        new = event(f"w{i}", "original", 1.0, NOW - 10 + i).model_copy(update={"threshold_id": "cal-0a1b"})
        store.add_score(old, 0.0)
        store.add_score(new, 0.0)
    frame = store.frame()
    cols = FrameColumns(frame)
    assert resolve(frame, cols, "npr@1", "traffic") == ("npr", "1+cal-0a1b")
    assert resolve(frame, cols, "npr@1+cal-0a1b", "traffic") == ("npr", "1+cal-0a1b")
    assert resolve(frame, cols, "npr@2", "traffic") is None
