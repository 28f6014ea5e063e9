"""Poison records (issue 27): a record whose key, value or headers are null, of another type or not UTF-8, one
kafka-python cannot decode, a tombstone, an unknown schema_version, and a video no encoder of the tree opens. Each
gets its outcome (a dead letter with its reason, or a counted skip), its offset is committed past it, the records
after it on the same partition are scored, and the gateway keeps running."""

from __future__ import annotations

import itertools
import json

import pytest

from gateway import bus
from gateway.core.config import MessageSettings
from gateway.core.messages import InvalidMessage, VideoEvent, inline_headers, parse_video_message
from gateway.stream import records
from tests.support.gateway import _config
from tests.support.media import make_clip
from tests.support.produce import NotUtf8, produce_raw
from tests.support.streaming import committed_offsets, metric, read_topics, scrape, start_gateway, status, wait_for
from transforms.engine import Engine
from transforms.errors import UnsupportedVideo
from transforms.limits import MAX_ENCODED_SIDE, Limits
from transforms.probe import probe
from transforms.spec import LASTMILE, PROFILES

OCTET = ("content-type", b"application/octet-stream")
REF = b'{"video_id": "v", "uri": "file:///v.mp4"}'


# -- one parse of keys, values and headers ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, headers, reason",
    [
        (b"x", [OCTET, ("lastmile-video-id", None)], "header 'lastmile-video-id' has a null value"),
        (b"x", [("content-type", None), ("lastmile-video-id", b"v")], "header 'content-type' has a null value"),
        (b"x", [OCTET, ("lastmile-video-id", b"\xff\xfe")], "header 'lastmile-video-id' is not UTF-8"),
        (b"x", [OCTET, ("lastmile-video-id", 7)], "has a int value, not bytes"),
        (b"x", [OCTET, (None, b"v")], "header name is a NoneType"),
        (b"x", 5, "headers are not"),
        (b"x", [("a", b"1", b"2")], "headers are not"),
        (b"\xff{}", None, "not UTF-8 JSON"),
        (None, None, r"tombstone \(null value\)"),
    ],
    ids=[
        "null-lastmile-header",
        "null-content-type",
        "non-utf8-header",
        "int-header",
        "null-header-name",
        "headers-not-a-list",
        "header-triple",
        "non-utf8-json",
        "tombstone",
    ],
)
def test_a_null_or_odd_key_value_or_header_is_an_invalid_message(value, headers, reason):
    with pytest.raises(InvalidMessage, match=reason):
        parse_video_message(value, headers)


def test_headers_of_other_clients_are_read_and_foreign_nulls_ignored():
    event, inline = parse_video_message(b"bytes", [(b"content-type", bytearray(OCTET[1])), ("lastmile-video-id", "v")])
    assert (event.video_id, inline) == ("v", b"bytes")
    event, inline = parse_video_message(REF, [("x-trace", None), (b"\xff", b"\xff")])
    assert (event.video_id, event.uri, inline) == ("v", "file:///v.mp4", None)


@pytest.mark.parametrize("version", [999, 3, 0, -1])
def test_an_unknown_schema_version_is_refused_naming_the_supported_ones(version):
    with pytest.raises(
        InvalidMessage, match=rf"schema_version {version} is not supported \(supported versions: 1, 2\)"
    ):
        parse_video_message(json.dumps({"schema_version": version, "video_id": "v", "uri": "u"}).encode(), None)
    headers = [OCTET, ("lastmile-video-id", b"v"), ("lastmile-schema-version", str(version).encode())]
    with pytest.raises(InvalidMessage, match="supported versions: 1, 2"):
        parse_video_message(b"bytes", headers)
    for known in (1, 2):
        assert parse_video_message(json.dumps({"schema_version": known, "video_id": "v", "uri": "u"}).encode(), None)


KEYS = [None, b"k", bytearray(b"k"), "k", 5]
VALUES = [None, b"", b"\xff\xfe", b"garbage", REF, bytearray(REF), memoryview(REF), "text", 7, b"x" * 2000]
HEADERS = [
    None,
    [],
    [("x", None)],
    [(None, b"x")],
    [OCTET],
    [OCTET, ("lastmile-video-id", None)],
    [OCTET, ("lastmile-video-id", b"\xff")],
    [(b"\xff", b"\xff")],
    [("x", 1.5)],
    7,
    [(1, 2, 3)],
]
TIMESTAMPS = [None, -1, 1_700_000_000_000, "x"]


def test_every_record_gets_an_outcome_a_producer_can_send():
    """records.read never raises, and a refusal's dead letter holds only what a Kafka producer sends."""
    bounds, seen = MessageSettings(), set()
    for key, value, headers, stamp in itertools.product(KEYS, VALUES, HEADERS, TIMESTAMPS):
        msg = bus.Record("t", 0, 0, stamp, key, value, headers)  # typed by the bus; records.read trusts none of it
        got = records.read(msg, 1000, bounds)
        seen.add(type(got).__name__)
        if value is None:
            assert got == records.Skip(records.TOMBSTONE, "tombstone (null value)")
        elif isinstance(got, records.Refusal):
            assert got.error_class in ("InvalidMessage", "MessageTooLarge") and got.reason
            assert isinstance(got.value, bytes) and (got.key is None or isinstance(got.key, bytes))
            assert all(isinstance(k, str) and (v is None or isinstance(v, bytes)) for k, v in got.headers)
        else:
            assert got.event.video_id and isinstance(got.value, bytes) and got.event_time > 0
    assert seen == {"Skip", "Refusal", "Video"}
    too_big = records.read(bus.Record("t", 0, 0, 0, b"k", b"x" * 1001, ()), 1000, bounds)
    assert (too_big.error_class, too_big.value, too_big.key) == ("MessageTooLarge", b"", b"k")


# -- a video no encoder opens -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def wide(tmp_path_factory) -> dict[str, bytes]:
    """Real VP9 streams made with the ffmpeg CLI: 32768x2 (libx264 refuses it in avcodec_open2) and the widest
    the H.264 encoder takes."""
    tmp = tmp_path_factory.mktemp("wide")
    vp9 = ("-c:v", "libvpx-vp9", "-deadline", "realtime")
    return {
        "over": make_clip(tmp, "over.webm", size="32768x2", rate="4", seconds="1", vcodec=vp9),
        "at": make_clip(tmp, "at.webm", size=f"{MAX_ENCODED_SIDE}x2", rate="4", seconds="1", vcodec=vp9),
    }


def test_a_side_longer_than_h264_encodes_is_refused_at_probe(wide):
    with pytest.raises(UnsupportedVideo, match="32768x2: a side over 16384 pixels"):
        probe(wide["over"], Limits())
    engine = Engine(PROFILES["throughput"].with_determinism(True))
    with pytest.raises(UnsupportedVideo, match="a side over 16384"):  # before any frame is decoded or encoded
        engine.run(wide["over"], LASTMILE)
    assert probe(wide["at"], Limits()).width == MAX_ENCODED_SIDE  # the bound is the encoder's, not below it
    assert set(engine.run(wide["at"], LASTMILE).variants) == {c.name for c in LASTMILE}


# -- through the real broker and gateway -------------------------------------------------------------------------


def test_poison_records_each_get_an_outcome_and_the_partition_moves_on(broker, tmp_path, wide):
    cfg = _config(broker, tmp_path, "poison", conditions="original", detectors="d3_px", workers=1)
    clip = tmp_path / "clip.mp4"
    clip.write_bytes(make_clip(tmp_path, "made.mp4"))
    k = cfg.kafka
    dead = {  # key: (value, headers, error class, reason), in this order on partition 0
        b"null-header": (b"\x00" * 64, [OCTET, ("lastmile-video-id", None)], b"InvalidMessage", b"null value"),
        b"null-ctype": (b"\x00" * 64, [("content-type", None)], b"InvalidMessage", b"null value"),
        b"bad-utf8": (b"\x00" * 64, [OCTET, ("lastmile-video-id", b"\xff")], b"InvalidMessage", b"not UTF-8"),
        b"v999": (
            json.dumps({"schema_version": 999, "video_id": "v999", "uri": clip.as_uri()}).encode(),
            [],
            b"InvalidMessage",
            b"supported versions: 1, 2",
        ),
        b"wide": (wide["over"], inline_headers(VideoEvent(video_id="wide")), b"UnsupportedVideo", b"over 16384"),
    }
    producer = bus.producer(k)
    produce_raw(k.bootstrap, k.input_topic, b"undecodable", b"{}", [(NotUtf8("x"), b"v")])  # offset 0
    for key, (value, headers, _, _) in list(dead.items())[:3]:
        produce_raw(k.bootstrap, k.input_topic, key, value, headers)
    producer.send_and_wait(k.input_topic, None, key=b"gone", partition=0)  # a tombstone
    for key, (value, headers, _, _) in list(dead.items())[3:]:
        producer.send_and_wait(k.input_topic, value, key=key, headers=headers, partition=0)
    good = VideoEvent(video_id="after-poison", uri=clip.as_uri()).model_dump_json().encode()
    produce_raw(k.bootstrap, k.input_topic, b"after-poison", good, [("x-trace", None)])  # a foreign null header
    n_records = len(dead) + 3
    gw, thread = start_gateway(cfg)
    got = read_topics(
        k.bootstrap,
        [k.output_topic, k.dlq],
        lambda g: len(g[k.dlq]) > len(dead) and {"after-poison", "wide"} <= {m.key.decode() for m in g[k.output_topic]},
    )
    assert wait_for(lambda: committed_offsets(k, k.group_id, k.input_topic).get(0) == n_records, 60, "commit")
    letters = {m.key: (m.value, dict(m.headers)) for m in got[k.dlq]}
    assert len(got[k.dlq]) == len(dead) + 1 and set(letters) == {*dead, None}  # each once, keyed as it came
    unreadable = letters[None][1]  # nobody can read its key or value: the letter says where it was
    assert unreadable["lastmile-error-class"] == b"InvalidMessage"
    assert b"unreadable record at offset 0 of poison.videos/0" in unreadable["lastmile-error-message"]
    for key, (value, _, cls, reason) in dead.items():
        letter_value, headers = letters[key]
        assert letter_value == value and headers["lastmile-error-class"] == cls, key
        assert reason in headers["lastmile-error-message"], (key, headers["lastmile-error-message"])
    assert letters[b"null-header"][1]["lastmile-video-id"] == b""  # forwarded, empty: kafka-python sends no null
    events = {json.loads(m.value)["video_id"]: json.loads(m.value) for m in got[k.output_topic]}
    assert set(events) == {"after-poison", "wide"}
    assert events["after-poison"]["error"] is None and events["after-poison"]["score"] is not None
    assert events["wide"]["error_class"] == "UnsupportedVideo"
    scraped = scrape(gw.port)
    assert metric(scraped, "lastmile_videos_total", outcome="skipped_tombstone") == 1
    assert metric(scraped, "lastmile_videos_total", outcome="scored") == 1
    assert metric(scraped, "lastmile_videos_total", outcome="dead_lettered") == len(dead) + 1
    assert metric(scraped, "lastmile_dead_letters_total", outcome="InvalidMessage") == 5
    assert metric(scraped, "lastmile_worker_failures_total") == 0  # refused at probe, not after crashing
    assert thread.is_alive() and gw.healthy() and status(gw.port, "/readyz") == 200
    gw.stop_event.set()
    thread.join(90)
    assert not thread.is_alive()


def test_a_field_that_fails_validation_is_a_one_line_reason_naming_it():
    """The reason a dead letter carries (and ``lastmile scores`` prints): pydantic's own text spanned four lines
    and opened with '1 validation error for VideoEvent'."""
    with pytest.raises(InvalidMessage) as got:
        parse_video_message(b'{"video_id": "v", "uri": "file:///v.mp4", "label": "maybe"}', None)
    assert str(got.value) == "the video event: label: Input should be 'real' or 'generated'"
