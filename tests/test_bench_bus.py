"""`lastmile bench bus` at its smallest: both engines write and read the same records on one local broker, each job
in a process of its own, and the JSON says what each read and at what CPU cost (the figures themselves are the
benchmark's, run apart: docs/tap.md)."""

from __future__ import annotations


def test_the_bus_benchmark_writes_and_reads_every_record_with_both_engines():
    from gateway.ops.bench.bus import ENGINES, bench_bus
    from tests.support.streaming import require_broker

    require_broker()
    out = bench_bus(records=3000, partitions=2)
    assert out["records"] == 3000 and 500 < out["value_bytes"] < 1000  # score events as the gateway writes them
    for job in ("write", "read", "read_as_records", "read_handed_out"):
        assert set(out[job]) == set(ENGINES), job
        for engine, got in out[job].items():
            assert got["records"] == 3000 and got["cpu_s"] > 0 and got["records_per_cpu_s"] > 0, (job, engine)
    for engine in ENGINES:  # every value read, except where only the records handed out are counted
        assert out["read"][engine]["bytes"] == out["read_as_records"][engine]["bytes"]
        assert abs(out["read"][engine]["bytes"] - 3000 * out["value_bytes"]) < 3000  # (value_bytes is rounded)
        assert out["read_handed_out"][engine]["bytes"] == 0
    assert (
        out["read_ratio_librdkafka_over_kafka_python"] > 0
        and out["read_handed_out_ratio_librdkafka_over_kafka_python"] > 0
    )
