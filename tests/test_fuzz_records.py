"""Fuzzing the tap: Hypothesis generates Kafka records (keys, values and headers: null, empty, huge, binary, control
characters, wrong types, nested JSON, unknown schema versions, hostile URIs) and sends them, as any client could,
to a real broker read by a real gateway. For every batch of records: each one gets exactly one outcome (scored,
dead-lettered naming where it was, or skipped and counted), the committed offsets pass all of them, the gateway is
alive and ready, and a valid video sent after them is scored.

Derandomized (the same records on every run, so CI cannot flake on a new draw); the records it sends are counted
in ``FUZZED`` and printed at the end of the module."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gateway import bus
from gateway.core.config import GatewayConfig
from gateway.core.messages import VideoEvent
from gateway.toolkit import tansu
from tests.support.gateway import _config
from tests.support.media import make_clip
from tests.support.produce import NotUtf8, produce_raw
from tests.support.streaming import committed_offsets, require_broker, scrape, start_gateway, status

LIMIT = 256 * 1024  # kafka.max_message_bytes here: "huge" values and headers go over it
HUGE = b"\x00\x1b[2J" * (LIMIT // 4 + 1)
FUZZED: list[int] = []


@pytest.fixture(scope="module")
def tap(tmp_path_factory):
    """A broker, a gateway on it, a reader of its output and dead letters, and a clip valid events name."""
    require_broker()
    root = tmp_path_factory.mktemp("fuzz")
    clip = root / "clip.mp4"
    clip.write_bytes(make_clip(root, "made.mp4"))
    with tansu.start_broker() as broker:
        cfg = _config(broker, root, "fuzz", conditions="original", detectors="d3_px", workers=1)
        cfg = cfg.model_copy(
            update={"kafka": cfg.kafka.model_copy(update={"max_message_bytes": LIMIT, "stall_check_s": 0.5})}
        )
        gw, thread = start_gateway(cfg)
        reader = bus.reader(cfg.kafka)
        reader.assign([bus.Partition(t, p) for t in (cfg.kafka.output_topic, cfg.kafka.dlq) for p in (0, 1)])
        reader.seek_to_beginning(*reader.assignment())
        yield cfg, gw, thread, reader, clip
        reader.close()
        gw.stop_event.set()
        thread.join(90)
    print(f"\nfuzzing: {sum(FUZZED)} records in {len(FUZZED)} batches")


# -- what a record may hold ------------------------------------------------------------------------------------------
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)  # any code point a client can encode
JSON_LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT
JSON = st.recursive(JSON_LEAF, lambda c: st.lists(c, max_size=3) | st.dictionaries(TEXT, c, max_size=3), max_leaves=8)
EVENT_FIELDS = {
    "schema_version": st.sampled_from([1, 2, 3, 999, -1, "2", None, 1.5]),
    "video_id": TEXT | st.integers() | st.none() | st.just("v" * 5000),
    "uri": st.sampled_from(["CLIP", "file:///etc/passwd", "http://127.0.0.1:9/x", "ftp://x/y", "", None, 7]) | TEXT,
    "label": st.sampled_from(["real", "generated", "fake", None, 1]),
    "canary": st.sampled_from([True, False, "yes", None]),
    "extra": JSON,
}


@st.composite
def event_value(draw) -> bytes:
    fields = {k: draw(v) for k, v in EVENT_FIELDS.items() if draw(st.booleans())}
    return json.dumps(fields).encode()


VALUES = st.one_of(
    st.none(),
    st.just(b""),
    st.binary(max_size=64),
    JSON.map(lambda j: json.dumps(j).encode()),
    event_value(),
    st.just(HUGE),
)
HEADER_NAMES = TEXT | st.sampled_from(["content-type", "lastmile-video-id", "lastmile-schema-version", "\r\n"])
HEADER_VALUES = st.none() | st.binary(max_size=32) | st.sampled_from([b"application/octet-stream", b"\xff", HUGE])
HEADERS = st.lists(st.tuples(HEADER_NAMES | st.just(NotUtf8("x")), HEADER_VALUES), max_size=4)
RECORDS = st.lists(
    st.tuples(st.none() | st.binary(max_size=24), VALUES, HEADERS, st.sampled_from([0, 1])), min_size=1, max_size=6
)


# -- the property ------------------------------------------------------------------------------------------------------
def _outcomes(port: int) -> dict[str, float]:
    return {k: v for k, v in scrape(port).items() if k.startswith("lastmile_videos_total{")}


def _read_until(reader, until, timeout_s: float = 120) -> list[bus.Record]:
    got: list[bus.Record] = []
    deadline = time.monotonic() + timeout_s
    while not until(got):
        assert time.monotonic() < deadline, f"timed out with {len(got)} records read"
        got += reader.poll(200)
    return got


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.generate,),  # no shrinking: the gateway is one live system, a re-run is not a fresh start
    suppress_health_check=list(HealthCheck),
)
@given(records=RECORDS)
def test_every_fuzzed_record_gets_exactly_one_outcome_and_the_tap_stays_up(tap, records):
    cfg, gw, thread, reader, clip = tap
    k, n = cfg.kafka, len(FUZZED)
    FUZZED.append(len(records))
    before = _outcomes(gw.port)
    for key, value, headers, partition in records:
        value = value.replace(b'"CLIP"', json.dumps(clip.as_uri()).encode()) if value else value
        produce_raw(k.bootstrap, k.input_topic, key, value, headers, partition)
    for p in (0, 1):  # a valid video last on each partition
        sentinel = VideoEvent(video_id=f"sentinel-{n}-{p}", uri=clip.as_uri()).model_dump_json().encode()
        produce_raw(k.bootstrap, k.input_topic, b"sentinel", sentinel, [], p)
    sentinels = {f"sentinel-{n}-0", f"sentinel-{n}-1"}
    got = _read_until(reader, lambda g: sentinels <= {_video_id(m) for m in g if m.topic == k.output_topic})
    ends = _ends(cfg)
    deadline = time.monotonic() + 60
    while committed_offsets(k, k.group_id, k.input_topic) != ends:
        assert time.monotonic() < deadline, "the committed offsets did not pass every record"
        time.sleep(0.1)  # the polling interval of a condition, not a synchronisation
    after = _outcomes(gw.port)
    delta = {series: after[series] - before.get(series, 0) for series in after}
    assert sum(delta.values()) == len(records) + 2, (delta, _shapes(records))  # one outcome each, sentinels too
    letters = [dict(m.headers) for m in got if m.topic == k.dlq]
    sources = [(h["lastmile-source-partition"], h["lastmile-source-offset"]) for h in letters]
    assert len(sources) == len(set(sources))  # no record dead-lettered twice
    assert all(h["lastmile-error-class"] and h["lastmile-error-message"] for h in letters)
    assert thread.is_alive() and gw.healthy() and status(gw.port, "/readyz") == 200


def _shapes(records: list) -> list[tuple]:
    """What a failing batch held, short: (partition, key is null, value length, [(header name, value length)])."""
    return [
        (p, key is None, None if v is None else len(v), [(str(h)[:12], len(x or b"")) for h, x in hs])
        for key, v, hs, p in records
    ]


def _video_id(m: bus.Record) -> str | None:
    try:
        return json.loads(m.value)["video_id"]
    except (TypeError, ValueError, KeyError):
        return None


def _ends(cfg: GatewayConfig) -> dict[int, int]:
    consumer = bus.reader(cfg.kafka)
    try:
        parts = [bus.Partition(cfg.kafka.input_topic, p) for p in (0, 1)]
        return {p.partition: end for p, end in consumer.end_offsets(parts, timeout_ms=10_000).items()}
    finally:
        consumer.close()
