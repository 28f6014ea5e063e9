"""A gateway that holds no input partition while its group's records wait uncommitted is not ready and says why
(:mod:`gateway.stream.membership`): a replay's only gateway once sat ready with no partition for the whole 300 s of a
test. Against a real broker, a member of the group that holds the one partition and never commits plays the
member that keeps the records from the gateway. (It commits rather than leaves to end the test: on Tansu the
gateway, left alone in the group by its leader, did not always get the partition within 120 s.)"""

from __future__ import annotations

import threading

from gateway import bus
from gateway.core.kafka_settings import KafkaSettings
from gateway.core.messages import VideoEvent
from gateway.stream.membership import Backlog, IdleWatch
from tests.support.gateway import _config, _readyz, _stop, _with_kafka
from tests.support.media import make_clip
from tests.support.streaming import FAST_GROUP, start_gateway, wait_for


# -- the watch, on its own ---------------------------------------------------------------------------------------
def test_an_idle_member_is_stuck_once_the_backlog_has_had_no_commit_for_the_period():
    watch = IdleWatch("t", "g", after_s=10)
    waiting = Backlog(5, (None, 3))
    assert watch.observe(waiting, now=0) is None
    assert watch.observe(waiting, now=9.9) is None
    stuck = watch.observe(waiting, now=10)
    assert stuck is not None and (stuck.behind, stuck.for_s) == (5, 10)
    assert str(stuck) == "holds no partition of t; group g has 5 records there with no commit for 10 s"


def test_a_commit_an_empty_backlog_or_a_partition_held_restarts_the_clock():
    watch = IdleWatch("t", "g", after_s=10)
    watch.observe(Backlog(5, (None, 3)), now=0)
    assert watch.observe(Backlog(4, (None, 4)), now=12) is None  # another member committed: the group moves
    assert watch.observe(Backlog(4, (None, 4)), now=21) is None
    assert watch.observe(Backlog(4, (None, 4)), now=22) is not None
    assert watch.observe(None, now=23) is None  # this member holds a partition: the stall watch's to judge
    assert watch.observe(Backlog(4, (None, 4)), now=30) is None
    assert watch.observe(Backlog(0, (2, 4)), now=45) is None  # nothing waits: idle is fine (more members than work)
    assert watch.observe(Backlog(0, (2, 4)), now=99) is None


def test_a_member_still_joining_is_given_its_own_longer_period_and_says_it_is_joining():
    watch = IdleWatch("t", "g", after_s=10, joining_after_s=30)
    waiting = Backlog(5, (None, 3))
    assert watch.observe(waiting, joined=False, now=0) is None
    assert watch.observe(waiting, joined=False, now=29) is None  # a slow join, not (yet) a stuck one
    stuck = watch.observe(waiting, joined=False, now=30)
    assert stuck is not None and stuck.joining
    assert str(stuck) == (
        "holds no partition of t (its join of the group not done); group g has 5 records there with no commit for 30 s"
    )
    joined = watch.observe(waiting, joined=True, now=30)  # joined, and handed nothing: the period counts from 0
    assert joined is not None and not joined.joining and joined.for_s == 30


def test_a_joining_members_period_defaults_to_what_a_join_may_take_and_never_under_the_idle_one():
    k = KafkaSettings(max_poll_interval_ms=300_000, session_timeout_ms=10_000)
    assert k.joining_after_s == 310  # a rebalance timeout and a session: a join may take that long
    short = KafkaSettings(max_poll_interval_ms=5000, probe_timeout_ms=2000, idle_member_after_s=600)
    assert short.joining_after_s == 600
    assert KafkaSettings(joining_member_after_s=42, idle_member_after_s=600).joining_after_s == 42  # as set


# -- a real group --------------------------------------------------------------------------------------------
class _Squatter:
    """A member of the group that joins first, so it holds the topic's one partition (the gateways' cooperative
    sticky assignor leaves a partition with its owner); it stays in the group and reads nothing, and commits only
    when told to. On librdkafka, as the gateway, so that the two share an assignment protocol."""

    def __init__(self, k) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({
            "bootstrap.servers": k.bootstrap, "group.id": k.group_id, "client.id": "a-squatter",
            "enable.auto.commit": False, "partition.assignment.strategy": "cooperative-sticky",
            "session.timeout.ms": FAST_GROUP["session_timeout_ms"],
            "heartbeat.interval.ms": FAST_GROUP["heartbeat_interval_ms"],
            "max.poll.interval.ms": FAST_GROUP["max_poll_interval_ms"],
        })  # fmt: skip
        self.held: list = []
        self.consumer.subscribe([k.input_topic], on_assign=self._assigned, on_revoke=self._revoked)
        self.commit_to: int | None = None  # set by the test; committed (and cleared) by the squatter's own thread
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assigned(self, consumer, partitions) -> None:
        consumer.incremental_assign(partitions)
        consumer.pause(partitions)  # holds, reads nothing
        self.held = [*self.held, *partitions]

    def _revoked(self, consumer, partitions) -> None:
        gone = {(p.topic, p.partition) for p in partitions}
        self.held = [p for p in self.held if (p.topic, p.partition) not in gone]

    def assignment(self) -> list:
        return list(self.held)

    def _run(self) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        while not self.stop.is_set():
            self.consumer.poll(0.1)
            if self.commit_to is not None and self.held:
                tp = self.held[0]
                try:
                    self.consumer.commit(offsets=[TopicPartition(tp.topic, tp.partition, self.commit_to)],
                                         asynchronous=False)  # fmt: skip
                except KafkaException:  # a rebalance under way: again on the next round
                    continue
                self.commit_to = None

    def close(self) -> None:
        self.stop.set()
        self.thread.join(30)
        self.consumer.close()


def test_a_gateway_with_no_partition_while_its_group_waits_is_not_ready_until_the_group_moves(broker, tmp_path):
    names = {"input_topic": "idle.videos", "output_topic": "idle.scores", "group_id": "idle-gw"}
    bus.ensure_topics(KafkaSettings(bootstrap=broker.bootstrap, **names), partitions=1)  # one: the squatter's
    base = _config(broker, tmp_path, "idle", conditions="original", detectors="d3_px", workers=1)
    cfg = _with_kafka(base, **names, idle_member_after_s=2.0, probe_interval_s=0.3)
    k, clip = cfg.kafka, tmp_path / "clip.mp4"
    clip.write_bytes(make_clip(tmp_path, "made.mp4"))
    squatter = _Squatter(k)
    wait_for(lambda: squatter.assignment(), 60, "the squatter to hold the partition")
    producer = bus.producer(k)
    producer.send(k.input_topic, VideoEvent(video_id="v", uri=clip.as_uri()).model_dump_json().encode(), key=b"v")
    producer.flush()
    gw, thread = start_gateway(cfg)
    try:
        # not ready from its start (joining, then handed nothing): wait for the second reason, which this test is
        # about; on a loaded machine the join outlasted the idle period and the first 503 was still the joining one
        member = lambda r: r[0] == 503 and "join of the group not done" not in r[1] and r  # noqa: E731
        _, body = wait_for(lambda: member(_readyz(gw.port)), 60, "not ready as a member handed nothing")
        assert "holds no partition of idle.videos; group idle-gw has 1 record there with no commit for " in body, body
        assert gw.consumer.assignment() == set() and thread.is_alive() and gw.healthy()
        assert gw.consumer.joined and "join" not in body  # a member of the group, handed nothing
        squatter.commit_to = 1  # the member holding the record commits past it: nothing waits, idle is fine
        assert wait_for(lambda: _readyz(gw.port)[0] == 200, 60, "ready again")
        assert gw.consumer.assignment() == set()  # still holding nothing, as a member of a group that moves
    finally:
        squatter.close()
        _stop(gw, thread)


def test_a_replay_whose_gateway_holds_no_partition_starts_it_again_in_a_fresh_group(broker, tmp_path):
    """The replay's remedy (:class:`~gateway.batch.kafka_replay.ReplayGateway`): its gateway, kept from the input's
    one partition by a member that never reads, is started again in a group of its own and scores every video."""
    import pyarrow.parquet as pq

    from detectors.manifest import read_manifest
    from detectors.proxy.corpus import CorpusConfig, synthesize
    from gateway.batch.kafka_replay import gateway_config, replay_via_kafka
    from gateway.batch.replay import ReplayConfig
    from gateway.stream.service import Gateway

    manifest = synthesize(
        CorpusConfig(anchors=1, seed=5, width=160, height=128, min_seconds=2, max_seconds=2), tmp_path / "c"
    )
    cfg = ReplayConfig(manifest=manifest, conditions="original", detectors="d3_px", profile="throughput")
    k = gateway_config(cfg, broker.bootstrap, "squatted", workers=1).kafka
    bus.ensure_topics(k, partitions=1)  # made before the replay's own (which keeps them): the squatter's one
    squatter = _Squatter(k)
    try:
        wait_for(lambda: squatter.assignment(), 60, "the squatter to hold the partition")
        stats: dict = {}
        path = replay_via_kafka(cfg, tmp_path / "run", broker.bootstrap, 1, 300, stats, run_id="squatted", tap=Gateway)
        assert squatter.assignment()  # it still holds the first group's partition, and read nothing
    finally:
        squatter.close()
    rows = pq.read_table(path).to_pylist()
    assert stats["groups"] == 2, stats  # the first group, then one fresh one
    assert sorted(r["video_id"] for r in rows) == sorted(r.video_id for r in read_manifest(manifest))  # each once
    assert len(rows) > 1 and all(r["error"] is None and r["condition"] == "original" for r in rows)
