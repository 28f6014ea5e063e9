"""`lastmile bench monitor` at its smallest: a broker loaded, a monitor process rebuilding its windows, scraped
while it ingests, and a second process restarting from its checkpoint (moved here from test_monitor.py, whose
other tests are unit tests)."""

from __future__ import annotations


def test_the_monitor_benchmark_fills_its_windows_from_a_broker_scrapes_and_restarts():
    from gateway.ops.bench.monitor import bench_monitor
    from tests.support.streaming import require_broker

    require_broker()
    out = bench_monitor(videos=360, partitions=2)
    assert out["videos_held"] == 360 and out["ingest_events"] == out["events_produced"] == 360 * 24
    assert out["scrape_bytes"] > 10_000 and out["ingest_events_per_s"] > 0 and out["peak_rss_mb"] > 0
    assert out["restart_videos_held"] == 360 and out["restart_to_ready_s"] > 0 and out["compute_s"] > 0
    assert out["series_with_auc"] == 24 and out["samples"] > 24 * 20  # it measured a computation of every series
    assert out["live_scrapes"] >= 1 and 0 < out["live_scrape_median_s"] <= out["live_scrape_max_s"]
    for over_http in ("http_scrape", "healthz"):  # the same scrapes over HTTP, and the kubelet's probe
        assert 0 < out[f"live_{over_http}_median_s"] <= out[f"live_{over_http}_max_s"]
    assert out["live_ingest_events_per_s"] > 0  # the tenth more videos, loaded while it was scraped
