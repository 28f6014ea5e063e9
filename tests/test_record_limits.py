"""Records of any size against a real broker and gateway: one no fetch of ours can hold (200 MB, 4 MB at a 256 KiB
limit) stops its partition and makes ``/readyz`` say which partition, offset and setting, and raising the setting
moves it on; a dead letter too large for the limit is reduced rather than blocking its partition."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from gateway import bus
from gateway.core.config import GatewayConfig, KafkaSettings
from gateway.core.messages import VideoEvent
from gateway.stream.publisher import KEPT_HEADER_BYTES, Publisher, Source
from tests.support.gateway import _config, _readyz, _stop, _with_kafka
from tests.support.media import make_clip
from tests.support.produce import produce_raw
from tests.support.streaming import (
    committed_offsets,
    metric,
    read_topics,
    scrape,
    start_gateway,
    start_monitor,
    wait_for,
)

MB = 1024 * 1024


def _video(clip, vid: str) -> bytes:
    return VideoEvent(video_id=vid, uri=clip.as_uri()).model_dump_json().encode()


def _letters(got: dict, dlq: str) -> dict[int, tuple[bytes, dict]]:
    """Dead letters by the offset of the record they stand for."""
    out = {}
    for m in got[dlq]:
        headers = dict(m.headers)
        out[int(headers["lastmile-source-offset"])] = (m.value, headers)
    return out


@pytest.mark.slow
def test_a_200_mb_record_on_a_broker_that_does_not_enforce_its_limit_stops_the_gateway_saying_which_setting(
    broker, tmp_path
):
    """Tansu takes a record larger than any topic limit: no fetch of the gateway's can hold it, so its partition
    (and, one broker answering for both, the other) stops; ``/readyz`` names where and the setting, the gateway
    stays up, and nothing is committed past it. (Issue 65: the batch used to be read apart and dead-lettered by
    reference.)"""
    cfg = _with_kafka(
        _config(broker, tmp_path, "huge", conditions="original", detectors="d3_px", workers=1),
        stall_check_s=1.0,
        stall_after_s=2.0,
        probe_interval_s=0.5,
    )
    k, clip = cfg.kafka, tmp_path / "clip.mp4"
    clip.write_bytes(make_clip(tmp_path, "made.mp4"))
    produce_raw(k.bootstrap, k.input_topic, b"null-header", _video(clip, "nh"), [("lastmile-video-id", None)])
    produce_raw(k.bootstrap, k.input_topic, b"huge", b"\0" * (200 * MB), [("content-type", b"video/mp4")])
    produce_raw(k.bootstrap, k.input_topic, b"after", _video(clip, "after"), [])
    gw, thread = start_gateway(cfg)
    _, body = wait_for(lambda: (r := _readyz(gw.port))[0] == 503 and "huge.videos/0" in r[1] and r, 90, "not ready")
    assert "huge.videos/0 stuck at offset" in body and "kafka.max_message_bytes (67108864)" in body
    assert thread.is_alive() and gw.healthy()
    assert committed_offsets(k, k.group_id, k.input_topic).get(0, 0) <= 1
    _stop(gw, thread)


def test_an_oversize_stall_makes_readyz_name_the_partition_and_the_setting_and_raising_it_moves_on(broker, tmp_path):
    base = _config(broker, tmp_path, "stall", conditions="original", detectors="d3_px", workers=1)
    cfg = _with_kafka(base, max_message_bytes=256 * 1024, stall_check_s=0.3, stall_after_s=1.5, probe_interval_s=0.3)
    k, clip = cfg.kafka, tmp_path / "clip.mp4"
    clip.write_bytes(make_clip(tmp_path, "made.mp4"))
    produce_raw(k.bootstrap, k.input_topic, b"big", b"\0" * (4 * MB), [])  # over 2 x (256 KiB + 1 MiB): unfetchable
    produce_raw(k.bootstrap, k.input_topic, b"after", _video(clip, "after"), [])
    gw, thread = start_gateway(cfg)
    _, body = wait_for(lambda: (r := _readyz(gw.port))[0] == 503 and r, 60, "not ready")
    assert "stall.videos/0 stuck at offset 0" in body and "2 records behind it" in body
    assert "kafka.max_message_bytes (262144)" in body
    assert metric(scrape(gw.port), "lastmile_stalled_partitions") == 1
    assert thread.is_alive() and gw.healthy()  # stuck, alive, and saying so
    assert committed_offsets(k, k.group_id, k.input_topic).get(0, 0) == 0
    _stop(gw, thread)
    gw, thread = start_gateway(_with_kafka(cfg, max_message_bytes=8 * MB))  # the fix the stall names
    got = read_topics(k.bootstrap, [k.output_topic, k.dlq], lambda g: g[k.output_topic] and g[k.dlq])
    assert wait_for(lambda: committed_offsets(k, k.group_id, k.input_topic).get(0) == 2, 60, "commit")
    assert [json.loads(m.value)["video_id"] for m in got[k.output_topic]] == ["after"]
    assert wait_for(lambda: _readyz(gw.port)[0] == 200, 30, "ready")
    assert metric(scrape(gw.port), "lastmile_stalled_partitions") == 0
    _stop(gw, thread)


def test_a_dead_letter_over_the_limit_is_reduced_and_its_partition_moves_on(broker, tmp_path):
    cfg = _with_kafka(
        _config(broker, tmp_path, "reduce", conditions="original", detectors="d3_px", workers=1),
        max_message_bytes=MB,
    )
    k = cfg.kafka
    small = [("x-small", b"kept")]
    # within the record limit (key, value and headers count), but not once the letter's reason is added
    big_value = b"{" + b"x" * (MB - 200 - len(b"big-value") - len("x-small") - len(b"kept"))
    big_header = [("x-trace", b"\x01\x02" * ((MB - 200 - len(b"big-header") - len("x-trace")) // 2))]
    produce_raw(k.bootstrap, k.input_topic, b"big-value", big_value, small)
    produce_raw(k.bootstrap, k.input_topic, b"big-header", b"{", big_header)
    gw, thread = start_gateway(cfg)
    got = read_topics(k.bootstrap, [k.dlq], lambda g: len(g[k.dlq]) >= 2)
    assert wait_for(lambda: committed_offsets(k, k.group_id, k.input_topic).get(0) == 2, 60, "commit")
    letters = _letters(got, k.dlq)
    value, headers = letters[0]
    assert value == b"" and headers["lastmile-dropped-value-bytes"] == str(len(big_value)).encode()
    assert headers["x-small"] == b"kept" and headers["lastmile-error-class"] == b"InvalidMessage"
    value, headers = letters[1]
    assert len(headers["x-trace"]) == KEPT_HEADER_BYTES and headers["lastmile-headers-truncated"] == b"1"
    assert headers["lastmile-error-class"] == b"InvalidMessage"
    assert thread.is_alive() and _readyz(gw.port)[0] == 200
    _stop(gw, thread)


def test_a_reduced_letter_fits_the_limit():
    settings = KafkaSettings(max_message_bytes=64 * 1024)
    publisher = Publisher(None, settings)  # (only its fitting: no producer asked)
    reason = [("lastmile-error-class", b"InvalidMessage"), *Source("t", 0, 7).headers()]
    headers = [(f"h{i}", b"v" * 4000) for i in range(100)]
    value, kept = publisher._fit(b"x" * 10_000, headers, reason, b"key")
    assert value == b"" and [k for k, _ in kept[-2:]] == ["lastmile-dropped-value-bytes", "lastmile-headers-truncated"]
    assert [k for k, _ in kept[:-2]] == [f"h{i}" for i in range(len(kept) - 2)] and 32 < len(kept) - 2 < 64
    assert all(len(v or b"") <= KEPT_HEADER_BYTES for _, v in kept)
    assert sum(len(k) + len(v or b"") for k, v in [*kept, *reason]) < settings.max_message_bytes
    assert publisher._fit(b"small", headers[:2], reason, None) == (b"small", headers[:2])  # fits: unchanged


def test_a_dead_letter_refused_as_too_large_goes_again_with_its_reason_alone(broker):
    """A letter that fits our record limit but is refused with RecordTooLarge (here by a producer whose request
    limit is lower, about 1 MB: what a broker with a lower limit than ours does, refused before it is sent) goes
    again without the value and original headers, keeping the reason, the source and the dropped size."""
    k = KafkaSettings(bootstrap=broker.bootstrap, input_topic="too-large", max_message_bytes=8 * MB)
    bus.ensure_topics(k)
    low = bus.producer(k.model_copy(update={"max_message_bytes": 1024}))  # ~1 MB requests
    publisher = Publisher(low, k)
    original = b"v" * (3 * MB)  # fits 8 MB, so _fit keeps it; over the ~1 MB requests
    publisher.dead_letter(original, [("x-trace", b"t")], "InvalidMessage", "bad", None, key=b"k", source=Source(
        "too-large", 0, 41))  # fmt: skip
    publisher.close()
    (letter,) = read_topics(k.bootstrap, [k.dlq], lambda g: len(g[k.dlq]) >= 1)[k.dlq]
    headers = dict(letter.headers)
    assert letter.value in (b"", None) and letter.key == b"k" and "x-trace" not in headers
    assert headers["lastmile-dropped-value-bytes"] == str(3 * MB).encode()
    assert headers["lastmile-error-class"] == b"InvalidMessage" and headers["lastmile-error-message"] == b"bad"
    assert headers["lastmile-source-offset"] == b"41"


def test_a_record_limit_below_the_largest_score_event_is_refused_at_start_up():
    with pytest.raises(ValueError, match=r"kafka.max_message_bytes \(16384\) is below the largest score event"):
        GatewayConfig(kafka={"max_message_bytes": 16384})
    assert GatewayConfig(kafka={"max_message_bytes": 64 * 1024}).kafka.max_message_bytes == 64 * 1024


def test_the_monitor_and_the_scores_reader_refuse_a_topic_over_their_limit_and_size_their_fetch_to_it(broker):
    """The readers read their topics' ``max.message.bytes`` at start too: over ``kafka.max_message_bytes``, one line
    naming the topic; within it, the reader's fetch is sized to the topics' limit (not the 64 MiB default)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from gateway.client.follow import follow
    from gateway.monitor.config import MonitorConfig, MonitorKafka
    from gateway.monitor.service import Monitor

    k = MonitorKafka(bootstrap=broker.bootstrap, input_topic="rl.videos", output_topic="rl.scores", dlq_topic="rl.dlq",
                     labels_topic="rl.labels", max_message_bytes=MB)  # fmt: skip
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    made = admin.create_topics(
        [NewTopic(t, 1, 1, config={"max.message.bytes": str(limit)})
         for t, limit in ((k.output_topic, 2 * MB), (k.dlq, MB // 2), (k.labels_topic, MB // 2))])  # fmt: skip
    for future in made.values():
        future.result(30)
    refused, pool = Monitor(MonitorConfig(http_port=0, kafka=k)), ThreadPoolExecutor(1)
    try:
        # a monitor that started instead of refusing is a TimeoutError here
        error = pool.submit(refused.run).exception(timeout=60)
    finally:
        refused.stop_event.set()
        pool.shutdown(wait=False)
    assert isinstance(error, bus.ClientConfigError), f"the monitor started: {error}"
    assert f"topic {k.output_topic} admits records of up to {2 * MB} bytes" in str(error)
    with pytest.raises(bus.ClientConfigError, match=f"topic {k.output_topic} admits records of up to {2 * MB} bytes"):
        follow(k, lambda record, table: None, keep_following=False)
    roomy = k.model_copy(update={"max_message_bytes": 64 * MB})
    assert bus.check_record_limits(roomy, [k.output_topic, k.labels_topic]).max_message_bytes == 2 * MB
    monitor, started = start_monitor(MonitorConfig(http_port=0, kafka=roomy))
    try:
        assert monitor.consumer.settings.max_message_bytes == 2 * MB  # sized to the topics it reads
    finally:
        monitor.stop_event.set()
        started.join(30)
    assert not started.is_alive()
