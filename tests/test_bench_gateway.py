"""`lastmile bench gateway` measures what it says: both paths score the same corpus, every video of it, and its
figures come from those runs (no timing is asserted: the machines are noisy)."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from gateway.ops.bench.gateway import bench_gateway, like_ratio, rate_basis, steady_rate
from tests.support.streaming import require_broker


def test_the_gateway_benchmark_scores_its_corpus_on_every_path_and_reports_from_those_runs(tmp_path):
    require_broker()
    report = bench_gateway(tmp_path, anchors=1, workers=1)
    for path in ("inproc", "kafka", "unloaded"):  # the in-process replay, through Kafka, one video at a time
        rows = pq.read_table(tmp_path / path / "results.parquet").to_pylist()
        assert rows and all(r["error"] is None for r in rows), (path, {r["error"] for r in rows})
    videos = {r["video_id"] for r in pq.read_table(tmp_path / "inproc" / "results.parquet").to_pylist()}
    assert len(videos) == 6 and report["corpus"].startswith("proxy corpus, 1 anchors, 6 videos")
    kafka, inproc = report["kafka"], report["inproc"]
    assert kafka["videos_per_s"] > 0 and inproc["videos_per_s"] > 0
    assert kafka["rate_basis"] == "steady"  # (6 results timed by perf_counter span an interval)
    if inproc["rate_basis"] == "steady":  # (file times, which a coarse file system may make one instant)
        ratio = kafka["videos_per_s"] / inproc["videos_per_s"]  # (of the rates rounded to 3 places: close, not equal)
        assert report["kafka_vs_inproc_throughput"] == pytest.approx(ratio, rel=0.02, abs=0.01)
    else:
        assert report["kafka_vs_inproc_throughput"] is None
    assert 0 < kafka["latency_loaded_p50_s"] <= kafka["latency_loaded_p99_s"]
    assert 0 < kafka["latency_unloaded_p50_s"] <= kafka["latency_unloaded_p99_s"]


def test_a_steady_rate_leaves_out_start_up_and_falls_back_to_wall_time_where_times_span_nothing():
    assert steady_rate([10.0, 12.0, 14.0, 16.0], videos=4, wall_s=30) == 0.5  # 3 intervals in 6 s
    assert steady_rate([16.0, 10.0, 14.0], videos=3, wall_s=30) == pytest.approx(2 / 6)  # in any order
    assert steady_rate([7.0, 7.0, 7.0], videos=3, wall_s=6) == 0.5  # a clock coarser than the run: wall time
    assert steady_rate([7.0], videos=1, wall_s=4) == 0.25
    assert [rate_basis(t) for t in ([10.0, 12.0], [7.0, 7.0], [7.0], [])] == ["steady", "wall", "wall", "wall"]
    assert like_ratio((3.0, "steady"), (2.0, "steady")) == 1.5 and like_ratio((3.0, "steady"), (2.0, "wall")) is None
    with pytest.raises(ValueError, match="a rate needs videos and a wall time"):
        steady_rate([], videos=0, wall_s=5)
