"""The Kafka boundary (gateway/bus/): the client's errors come out as the project's, records and partitions in the
project's types, the fetcher workaround for resumed partitions still needed and still working, and no module
outside the bus importing the client."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path

import pytest
from kafka import errors as kafka_errors

from gateway import bus
from gateway.bus import clients
from gateway.bus.errors import mapped, to_bus_error
from gateway.bus.fetch import NEXT_RECORDS, PARKED_RECORDS, poll_client
from gateway.core.config import KafkaSettings
from tests.streaming import require_broker
from tests.test_poison_records import _produce_raw

ROOT = Path(__file__).resolve().parents[1]


# -- errors ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "client_error, ours",
    [
        (kafka_errors.CommitFailedError("rebalanced"), bus.CommitFailed),
        (kafka_errors.RebalanceInProgressError(), bus.CommitFailed),
        (kafka_errors.MessageSizeTooLargeError("too big"), bus.RecordTooLarge),
        (kafka_errors.UnknownTopicOrPartitionError(), bus.UnknownTopic),
        (kafka_errors.CorruptRecordError("crc"), bus.CorruptBatch),
        (kafka_errors.KafkaTimeoutError("no answer"), bus.BrokerUnavailable),
        (kafka_errors.KafkaConnectionError("refused"), bus.BrokerUnavailable),
        (kafka_errors.NotLeaderForPartitionError(), bus.BrokerUnavailable),  # retriable: a leader moving
        (kafka_errors.IllegalArgumentError("x"), bus.BusError),
    ],
)
def test_the_clients_errors_come_out_as_the_projects_chained(client_error, ours):
    with pytest.raises(ours) as caught, mapped():
        raise client_error
    assert type(caught.value) is ours and isinstance(caught.value, bus.BusError)
    assert caught.value.__cause__ is client_error  # what the client said stays in the traceback
    assert type(client_error).__name__ in str(caught.value)


def test_what_is_not_the_clients_passes_unchanged():
    assert to_bus_error(ValueError("a bug")) is None
    with pytest.raises(ValueError, match="a bug"), mapped():
        raise ValueError("a bug")


# -- the contract -----------------------------------------------------------------------------------------------
def test_every_gateway_subpackage_but_the_bus_is_forbidden_the_client():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["id"] == "kafka-boundary"]
    assert contract["forbidden_modules"] == ["kafka"] and config["include_external_packages"] is True
    subpackages = {f"gateway.{p.parent.name}" for p in (ROOT / "gateway").glob("*/__init__.py")}
    assert subpackages - {"gateway.bus"} <= set(contract["source_modules"])
    assert {"transforms", "detectors"} <= set(contract["source_modules"])
    assert not [p.name for p in (ROOT / "gateway").glob("*.py") if p.name != "__init__.py"]  # all in a package


# -- against the real broker --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def broker():
    require_broker()
    with bus.start_broker() as b:
        yield b


def _settings(broker, name: str, **extra) -> KafkaSettings:
    k = KafkaSettings(bootstrap=broker.bootstrap, input_topic=name, group_id=f"{name}-group", **extra)
    bus.ensure_topics(k, partitions=2)
    return k


def _produce(k: KafkaSettings, per_partition: int) -> None:
    producer = bus.producer(k)
    try:
        for p in (0, 1):
            for i in range(per_partition):
                producer.send_and_wait(k.input_topic, f"{p}-{i}".encode(), key=b"k", partition=p)
    finally:
        producer.close()


def _poll_until(poll, n: int, timeout_s: float = 30) -> list:
    got, deadline = [], time.monotonic() + timeout_s
    while len(got) < n and time.monotonic() < deadline:
        got += poll()
    return got


def _pause_mid_batch_then_resume(pause, resume, poll) -> list:
    """Read one record, pause its partition (its other records fetched, not yet handed out), read one record of
    the other partition (it takes the client's in-line slot and drains it), resume, read on."""
    got = _poll_until(poll, 1)
    paused = got[0][0]
    pause(paused)
    got += poll()
    resume(paused)
    return got + _poll_until(poll, 8 - len(got), timeout_s=5)


def test_a_partition_paused_mid_batch_and_resumed_is_read_to_its_end(broker):
    """The regression test of the fetcher workaround (gateway/bus/fetch.py): without it kafka-python never hands
    out the rest of a partition paused mid-batch and resumed; with it every record comes, in order."""
    k = _settings(broker, "resume")
    _produce(k, per_partition=4)
    parts = [bus.Partition(k.input_topic, p) for p in (0, 1)]

    raw = clients.reader_client(k)  # the client alone: the bug is still there (else the workaround can go)
    raw.assign([clients.to_client(p) for p in parts])
    raw.seek_to_beginning()
    fetcher = raw._fetcher
    assert hasattr(fetcher, NEXT_RECORDS) and hasattr(fetcher, PARKED_RECORDS)  # the fields it reads still exist
    lost = _pause_mid_batch_then_resume(
        raw.pause, raw.resume, lambda: [(tp, m.offset) for tp, ms in raw.poll(500, 1).items() for m in ms]
    )
    raw.close()
    assert len(lost) < 8, "kafka-python restores resumed partitions itself now: drop restore_resumed"

    consumer = bus.reader(k)
    consumer.assign(parts)
    consumer.seek_to_beginning(*parts)
    got = _pause_mid_batch_then_resume(
        consumer.pause, consumer.resume, lambda: [(r.topic_partition, r.offset) for r in consumer.poll(500, 1)]
    )
    consumer.close()
    assert sorted(got) == [(p, o) for p in parts for o in range(4)]


def test_poll_on_a_client_hands_out_the_projects_records(broker):
    k = _settings(broker, "poll-raw")
    _produce(k, per_partition=1)
    raw = clients.reader_client(k)
    raw.assign([clients.to_client(bus.Partition(k.input_topic, p)) for p in (0, 1)])
    raw.seek_to_beginning()
    got = _poll_until(lambda: [r for rs in poll_client(raw, 500).values() for r in rs], 2)
    raw.close()
    assert {(r.partition, r.value) for r in got} == {(0, b"0-0"), (1, b"1-0")}
    assert all(isinstance(r, bus.Record) and r.timestamp_ms and r.key == b"k" for r in got)


def test_records_come_in_the_projects_types_null_header_values_included(broker):
    k = _settings(broker, "typed")
    _produce_raw(k.bootstrap, k.input_topic, None, b"v", [("x-null", None), ("x", b"1")])
    consumer = bus.reader(k)
    consumer.assign([bus.Partition(k.input_topic, 0)])
    consumer.seek_to_beginning()
    (record,) = _poll_until(lambda: consumer.poll(500), 1)
    consumer.close()
    assert record == bus.Record(k.input_topic, 0, 0, record.timestamp_ms, None, b"v", (("x-null", None), ("x", b"1")))
    assert record.topic_partition == bus.Partition(k.input_topic, 0) and record.timestamp_ms > 0


def test_a_group_commits_reports_lag_and_hears_of_rebalances(broker):
    k = _settings(broker, "group", session_timeout_ms=4000, heartbeat_interval_ms=500, max_poll_interval_ms=4000)
    _produce(k, per_partition=2)
    assigned: list[bus.Partition] = []
    consumer = bus.consumer(k)
    consumer.subscribe([k.input_topic], listener=bus.Rebalance(on_assigned=assigned.extend))
    got = _poll_until(lambda: consumer.poll(500), 4)
    assert sorted(assigned) == [bus.Partition(k.input_topic, p) for p in (0, 1)]
    assert consumer.lag(k.input_topic, timeout_ms=5000) == 0
    consumer.commit({r.topic_partition: r.offset + 1 for r in got})
    assert bus.committed_offsets(k, k.group_id, k.input_topic) == {0: 2, 1: 2}
    consumer.seek(bus.Partition(k.input_topic, 0), 0)
    assert consumer.lag(k.input_topic, timeout_ms=5000) == 2
    consumer.close()


def test_a_record_over_the_producers_limit_is_record_too_large(broker):
    k = _settings(broker, "large", max_message_bytes=1024)
    producer = bus.producer(k)
    try:
        with pytest.raises(bus.RecordTooLarge, match="MessageSizeTooLargeError"):
            producer.send_and_wait(k.input_topic, b"x" * (2 * 1024 * 1024))
        assert producer.send_and_wait(k.input_topic, b"small", headers=[("null", None)], partition=1) == 0
    finally:
        producer.close()
