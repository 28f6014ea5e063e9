"""`lastmile bench gateway` measures what it says: both paths score the same corpus, every video of it, and its
figures come from those runs (no timing is asserted: the machines are noisy)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from gateway.ops.bench import bench_gateway
from tests.streaming import require_broker


def test_the_gateway_benchmark_scores_its_corpus_on_every_path_and_reports_from_those_runs(tmp_path):
    require_broker()
    report = bench_gateway(tmp_path, anchors=1, workers=1)
    for path in ("inproc", "kafka", "unloaded"):  # the in-process replay, through Kafka, one video at a time
        rows = pq.read_table(tmp_path / path / "results.parquet").to_pylist()
        assert rows and all(r["error"] is None for r in rows), (path, {r["error"] for r in rows})
    videos = {r["video_id"] for r in pq.read_table(tmp_path / "inproc" / "results.parquet").to_pylist()}
    assert len(videos) == 6 and report["corpus"].startswith("proxy corpus, 1 anchors, 6 videos")
    kafka, inproc = report["kafka"], report["inproc"]
    assert kafka["videos_per_s"] > 0 and inproc["videos_per_s"] > 0 and kafka["groups"] >= 1
    ratio = kafka["videos_per_s"] / inproc["videos_per_s"]  # (of the rounded rates: close, not equal)
    assert report["kafka_vs_inproc_throughput"] == pytest.approx(ratio, rel=0.01, abs=0.002)
    assert 0 < kafka["latency_loaded_p50_s"] <= kafka["latency_loaded_p99_s"]
    assert 0 < kafka["latency_unloaded_p50_s"] <= kafka["latency_unloaded_p99_s"]
