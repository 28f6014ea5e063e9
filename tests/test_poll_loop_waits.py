"""What the poll loop may wait for (unit): the broker questions asked inside it, the stall watch's above all, stay
within the poll interval that keeps the member in its group (:mod:`gateway.stream.stalls`)."""

from __future__ import annotations

import pytest

from gateway import bus
from gateway.core.kafka_settings import KafkaSettings
from gateway.stream import stalls


def test_the_poll_loops_questions_must_fit_twice_in_its_poll_interval():
    """The poll loop asks the broker questions that wait up to ``probe_timeout_ms``; one that outlasts
    ``max_poll_interval_ms`` gets the member dropped, and its records, the one asked about too, redelivered."""
    with pytest.raises(ValueError, match=r"probe_timeout_ms \(5000\) is over half of max_poll_interval_ms \(5000\)"):
        KafkaSettings(max_poll_interval_ms=5000)
    assert KafkaSettings(max_poll_interval_ms=4000, probe_timeout_ms=2000).probe_timeout_ms == 2000
    from gateway.monitor.config import MonitorKafka

    assert MonitorKafka(max_poll_interval_ms=5000).probe_timeout_ms == 5000  # the monitor joins no group: no rule


class _Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class _Still:
    """A consumer whose three partitions have not moved from offset 5, with records up to 10 behind them."""

    def __init__(self, known: int | None = None, answer: Exception | None = None) -> None:
        self.known, self.answer, self.asked = known, answer, []

    def assignment(self):
        return {bus.Partition("t", p) for p in range(3)}

    def paused(self):
        return set()

    def position(self, p):
        return 5

    def known_end(self, p, since):
        return self.known

    def end_offsets(self, partitions, timeout_ms=None):
        self.asked.append((sorted(partitions), timeout_ms))
        if self.answer is not None:
            raise self.answer
        return dict.fromkeys(partitions, 10)


def test_the_stall_watch_asks_the_ends_of_its_unmoved_partitions_in_one_question_within_a_probe_timeout():
    """The watch runs inside the poll loop: partitions unmoved for ``stall_check_s`` are judged together, one
    question to the broker that waits ``probe_timeout_ms`` at most, and none again until ``stall_check_s`` later."""
    clock, consumer = _Clock(), _Still()
    watch = stalls.Watch(KafkaSettings(probe_timeout_ms=1000, stall_check_s=5), clock)
    watch.observe(consumer)
    assert consumer.asked == []  # positions noted
    clock.t += 5
    watch.observe(consumer)
    assert consumer.asked == [([bus.Partition("t", p) for p in range(3)], 1000)]
    clock.t += 1
    watch.observe(consumer)
    assert len(consumer.asked) == 1
    assert [(s.partition.partition, s.offset, s.behind) for s in watch.stalls(5, lambda since: "")] == [
        (0, 5, 5), (1, 5, 5), (2, 5, 5)]  # fmt: skip


def test_ends_the_client_knows_are_not_asked_of_the_broker():
    """librdkafka's statistics hold each partition's end: a watch on them asks the broker nothing."""
    clock, consumer = _Clock(), _Still(known=10)
    watch = stalls.Watch(KafkaSettings(probe_timeout_ms=1000, stall_check_s=5), clock)
    watch.observe(consumer)
    clock.t += 5
    watch.observe(consumer)
    assert consumer.asked == [] and len(watch.stalls(5, lambda since: "a cause")) == 3
    assert str(watch.stalls(5, lambda since: "a cause")[0]).endswith("with 5 records behind it: a cause")


def test_a_broker_that_leaves_the_ends_unanswered_is_not_asked_again_for_a_stall_check():
    clock, consumer = _Clock(), _Still(answer=bus.NoAnswer("frozen"))
    watch = stalls.Watch(KafkaSettings(probe_timeout_ms=1000, stall_check_s=5), clock)
    watch.observe(consumer)
    clock.t += 5
    watch.observe(consumer)
    clock.t += 4
    watch.observe(consumer)
    assert len(consumer.asked) == 1  # the poll loop is not held again within stall_check_s
    clock.t += 2
    watch.observe(consumer)
    assert len(consumer.asked) == 2
