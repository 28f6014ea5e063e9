"""What only the kafka-python engine needs (gateway/bus/kafka_python/): the workarounds that reach into its private
fields (the fetcher's, the coordinator's join task), each still needed and still working; its eager assignors,
which its ``joined`` counts on; and hooks that commit nothing, since kafka-python runs them on its IO thread."""

from __future__ import annotations

import threading
import time

import pytest

from gateway import bus
from gateway.bus.kafka_python import config
from gateway.bus.kafka_python.fetch import NEXT_RECORDS, PARKED_RECORDS
from gateway.bus.kafka_python.join import COORDINATOR, JOIN_TASK
from gateway.core.kafka_settings import KafkaSettings
from gateway.toolkit import tansu
from tests.support.produce import NotUtf8, produce_batch
from tests.support.streaming import FAST_GROUP, require_broker, wait_for


@pytest.fixture(scope="module")
def broker():
    """A broker of this module's own, so that its groups' joins are not held up by other modules' groups."""
    require_broker()
    with tansu.start_broker() as b:
        yield b


def _settings(broker, name: str, **extra) -> KafkaSettings:
    k = KafkaSettings(bootstrap=broker.bootstrap, client="kafka-python", input_topic=name, group_id=f"{name}-group",
                      **extra)  # fmt: skip
    bus.ensure_topics(k, partitions=2)
    return k


def _produce(k: KafkaSettings, per_partition: int) -> None:
    producer = bus.producer(k)
    try:
        for p in (0, 1):
            for i in range(per_partition):
                producer.send(k.input_topic, f"{p}-{i}".encode(), key=b"k", partition=p)
        producer.flush()
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
    """The regression test of the fetcher workaround (gateway/bus/kafka_python/fetch.py): without it kafka-python
    never hands out the rest of a partition paused mid-batch and resumed; with it every record comes, in order."""
    from kafka import TopicPartition

    k = _settings(broker, "resume")
    _produce(k, per_partition=4)
    parts = [bus.Partition(k.input_topic, p) for p in (0, 1)]

    # the client alone: the bug is still there (else the workaround can go)
    raw = config.consumer_client(k, group=False)
    raw.assign([TopicPartition(*p) for p in parts])
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


def test_the_records_around_an_undecodable_one_in_its_batch_come_each_once(broker):
    """The undecodable-record workaround (gateway/bus/kafka_python/fetch.py) seeks one past the record kafka-python
    cannot decode; the record before it in the same batch comes first (kafka-python 3.0 hands out what it decoded
    and raises on the next poll). kafka-python's decoder stops at the bad record for the rest of its batch, so the
    record after it is passed on as unreadable too (as before issue 65; librdkafka reads it): one outcome each,
    none lost, none twice."""
    k = _settings(broker, "around-undecodable")
    produce_batch(
        k.bootstrap, k.input_topic, [(b"a", b"0", []), (b"b", b"1", [(NotUtf8("x"), b"v")]), (b"c", b"2", [])]
    )
    consumer = bus.reader(k)
    p = bus.Partition(k.input_topic, 0)
    consumer.assign([p])
    consumer.seek_to_beginning(p)
    try:
        got = _poll_until(lambda: consumer.poll(500), 3)
    finally:
        consumer.close()
    kinds = [(type(r).__name__, r.offset) for r in got]
    assert kinds == [("Record", 0), ("UnreadableRecord", 1), ("UnreadableRecord", 2)] and got[0].value == b"0"


def _poll_until_a_join_finished(client) -> object:
    """Start the member's join and let it finish with nobody polling (a caller busy between polls, or a loaded
    machine): the finished, successful JoinGroup+SyncGroup task, not yet completed by any poll."""
    coordinator = getattr(client, COORDINATOR)
    while True:
        wait_for(lambda: client.poll(0) is not None and getattr(coordinator, JOIN_TASK) is not None, 30, "a join")
        task = getattr(coordinator, JOIN_TASK)
        wait_for(lambda t=task: t.is_done, 30, "the join to finish")  # no poll meanwhile
        if task.succeeded():  # (a broker may first answer "member id required": the next poll joins again)
            return task
        client.poll(0)


def test_a_join_that_finished_between_two_polls_is_completed_not_thrown_away(broker):
    """The regression test of gateway/bus/kafka_python/join.py: kafka-python as shipped answers a join that
    finished between two polls with a fresh JoinGroup and no assignment (on a loaded CI machine: a member that
    joined 30 times in 60 s and read nothing); with the workaround the next poll completes it."""
    k = _settings(broker, "joins")
    _produce(k, per_partition=1)
    parts = {(k.input_topic, 0), (k.input_topic, 1)}

    bare = config.consumer_client(k)
    vars(getattr(bare, COORDINATOR)).pop("join_group_async", None)  # kafka-python's own method again
    try:
        bare.subscribe([k.input_topic])
        finished = _poll_until_a_join_finished(bare)
        bare.poll(100)
        assert not bare.assignment(), "kafka-python completes a finished join itself now: drop join.py"
        assert getattr(getattr(bare, COORDINATOR), JOIN_TASK) is not finished  # it joined again instead
    finally:
        bare.close()

    kept = config.consumer_client(k)
    try:
        kept.subscribe([k.input_topic])
        _poll_until_a_join_finished(kept)
        kept.poll(100)
        assert {(tp.topic, tp.partition) for tp in kept.assignment()} == parts
    finally:
        kept.close()


def test_a_member_runs_eager_assignors_only_which_joined_counts_on(broker):
    from kafka.coordinator.assignors.abstract import RebalanceProtocol

    consumer = bus.consumer(_settings(broker, "eager"))
    try:
        assignors = consumer._client.config["partition_assignment_strategy"]
        assert assignors and all(a().supported_protocols() == [RebalanceProtocol.EAGER] for a in assignors)
    finally:
        consumer.close()


def test_a_gateway_listener_with_work_done_but_uncommitted_polls_through_a_rebalance(broker):
    """A second member joins while the first has records done and not yet committed: the revoke must not commit
    (kafka-python runs the hook on its IO thread, where a commit raises) and the poll goes on."""
    from gateway.stream.offsets import OffsetTracker, rebalance_listener

    k = _settings(broker, "revoke", **FAST_GROUP)
    _produce(k, per_partition=1)
    first, tracker, got = bus.consumer(k), OffsetTracker(), []
    first.subscribe([k.input_topic], listener=rebalance_listener(tracker))
    wait_for(lambda: got.extend(first.poll(100)) or len(got) == 2, 60, "both records")
    for r in got:
        tracker.start(r.topic_partition, r.offset)
        tracker.finish(r.topic_partition, r.offset)
    assert tracker.committable()  # done, uncommitted: what the old hook committed, on the IO thread
    other = bus.consumer(k)
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
