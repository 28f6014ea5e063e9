"""What the poll loop may wait for (unit): the broker questions asked inside it, the stall watch's above all, stay
within the poll interval that keeps the member in its group (:mod:`gateway.bus.stalls`)."""

from __future__ import annotations

import pytest

from gateway import bus
from gateway.bus import stalls
from gateway.bus.oversize import Batch
from gateway.core.kafka_settings import KafkaSettings


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

    def __init__(self) -> None:
        self.seeks: dict[bus.Partition, int] = {}

    def assignment(self):
        return {bus.Partition("t", p) for p in range(3)}

    def paused(self):
        return set()

    def position(self, p):
        return self.seeks.get(p, 5)

    def seek(self, p, offset):
        self.seeks[p] = offset

    def end_offsets(self, partitions, timeout_ms=None):
        return dict.fromkeys(partitions, 10)

    def last_oversize(self):
        return 0.0


class _SlowReader:
    """Reads apart an oversize batch (offsets 5-9) at any position, each read taking 0.6 s of the clock."""

    def __init__(self, clock: _Clock) -> None:
        self.clock, self.asked = clock, []

    def probe(self, p, offset):
        self.asked.append(p)
        self.clock.t += 0.6
        return Batch(offset, 9, 3 << 20, 10)

    def records(self, p, offset, batch):
        return [bus.OversizeRecord(*p, o, batch.size, 1024) for o in range(offset, batch.last_offset + 1)]


def test_the_stall_watch_defers_what_it_cannot_judge_within_a_probe_timeout_to_the_next_poll():
    """The watch runs inside the poll loop: once a round has spent ``probe_timeout_ms`` reading apart, the
    partitions still due wait for the next poll (a round that judged all three here would hold the loop 1.8 s)."""
    clock = _Clock()
    reader, consumer = _SlowReader(clock), _Still()
    watch = stalls.Watch(KafkaSettings(probe_timeout_ms=1000, stall_check_s=5), reader, clock)
    assert watch.observe(consumer) == []  # positions noted
    clock.t += 5
    first = watch.observe(consumer)
    assert reader.asked == [bus.Partition("t", 0), bus.Partition("t", 1)]  # 1.2 s spent: the third waits
    assert {(r.partition, r.offset) for r in first} == {(p, o) for p in (0, 1) for o in range(5, 10)}
    assert consumer.seeks == {bus.Partition("t", 0): 10, bus.Partition("t", 1): 10}
    second = watch.observe(consumer)  # the next poll, at once: the deferred one is judged, not left for 5 s
    assert reader.asked[2:] == [bus.Partition("t", 2)]
    assert {(r.partition, r.offset) for r in second} == {(2, o) for o in range(5, 10)}


def test_a_round_whose_end_offsets_took_its_share_starts_no_judgement():
    """The round's share counts from before the ends are asked: ends that took the whole of it leave every partition
    to the next poll, instead of a leader lookup and a read apart on top; but ends always that slow cannot leave a
    stalled partition for good: after a round that judged nothing, the next judges one."""
    clock = _Clock()
    reader, consumer = _SlowReader(clock), _Still()
    slow_ends = consumer.end_offsets

    def end_offsets(partitions, timeout_ms=None):
        clock.t += 1.0  # answered, at the end of the probe's timeout
        return slow_ends(partitions, timeout_ms)

    consumer.end_offsets = end_offsets
    watch = stalls.Watch(KafkaSettings(probe_timeout_ms=1000, stall_check_s=5), reader, clock)
    watch.observe(consumer)
    clock.t += 5
    assert watch.observe(consumer) == [] and reader.asked == []  # no read apart in this round
    assert len(watch.observe(consumer)) == 5 and len(reader.asked) == 1  # the next: one, however slow the ends
    assert watch.observe(consumer) == [] and len(reader.asked) == 1  # then the share holds again
    assert len(watch.observe(consumer)) == 5 and len(reader.asked) == 2  # a stall is never left for good
