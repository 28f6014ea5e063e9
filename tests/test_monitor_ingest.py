"""The monitor's ingest hot path equals the per-event path it replaced: score events decoded without a pydantic
model (:mod:`gateway.monitor.decode`) hold the model's values, and an event the model refuses is refused
(malformed JSON, wrong types, missing and extra fields); a poll's score events kept together
(:meth:`Store.add_scores`) count the same outcomes and hold the same rows as one ``add_score`` each."""

from __future__ import annotations

import json
import math
from collections import Counter

import numpy as np
import pytest

from gateway import bus
from gateway.core.messages import LabelEvent, ScoreEvent, idempotency_key
from gateway.monitor.config import MonitorConfig, WindowSettings
from gateway.monitor.decode import fast_fields, score_fields
from gateway.monitor.service import Monitor
from gateway.monitor.store import Store

NOW = 1_800_000_000.0
REQUIRED = ("video_id", "condition", "detector", "detector_version", "runtime", "idempotency_key")


def full(**more) -> dict:
    """A score event's JSON fields as the gateway writes them (every field present)."""
    event = ScoreEvent(video_id="v1", condition="original", detector="npr", detector_version="1", runtime="embedded",
                       score=0.25, decision=True, threshold=0.0, label="generated", event_time=NOW - 10,
                       idempotency_key=idempotency_key("v1", "original", "npr", "1"), width=640, fps=25.0)  # fmt: skip
    return event.model_dump(mode="json") | more


def minimal(**more) -> dict:
    return {k: full()[k] for k in REQUIRED} | more


def raw(fields: dict) -> bytes:
    return json.dumps(fields).encode()


def without(name: str) -> bytes:
    return raw({k: v for k, v in full().items() if k != name})


full_bytes = raw(full())
WELL_FORMED = [full_bytes, raw(minimal()), raw(full(video_id="vidéo ☃ \U0001f600"))]
WRONG_TYPES = [  # some the model coerces (then its values hold), most it refuses
        ("score", "0.5"), ("score", True), ("score", 1), ("score", [1.0]), ("score", {}), ("decision", "yes"),
        ("decision", 1), ("decision", "true"), ("decision", 0.0), ("canary", None), ("canary", 0), ("canary", "no"),
        ("video_id", 12), ("video_id", None), ("video_id", True), ("width", 1.5), ("width", 2.0), ("width", "3"),
        ("width", True), ("width", 10**30), ("width", 2**64), ("width", -(2**63) - 1), ("schema_version", "2"),
        ("schema_version", None), ("event_time", "1.5e9"), ("event_time", 17), ("label", 3), ("error_kind", "other"),
        ("error_kind", "video"), ("error_kind", None), ("error_kind", 1), ("detector_version", 1),
        ("threshold", False), ("fps", 10**400), ("idempotency_key", ["k"]),
]  # fmt: skip
MALFORMED = [
    *(raw(full(**{k: v})) for k, v in WRONG_TYPES),
    *(without(name) for name in REQUIRED),  # missing fields
    without("score"),  # an optional one: its default
    raw(full(extra=1)),
    raw(full(extra=[1, {"a": None}])),
    raw(minimal(x="y")),  # extra fields (ignored by the model)
    full_bytes[:-1] + b', "deep": ' + b"[" * 300 + b"]" * 300 + b"}",  # ... one nested deeper than its parser takes
    b"",
    None,
    b"not json",
    b"[]",
    b"null",
    b"1",
    b'"text"',
    full_bytes[:-5],
    full_bytes + b" x",
    full_bytes + b" \n",
    b" \t" + full_bytes,
    full_bytes.replace(b'"score": 0.25', b'"score": NaN'),
    full_bytes.replace(b'"score": 0.25', b'"score": 1e400'),
    full_bytes.replace(b'"score": 0.25', b'"score": -0.0'),
    full_bytes.replace(b'"score": 0.25', b'"score": 0.1000000000000000055511151231257827021181583404541015625'),
    full_bytes.replace(b'"video_id": "v1"', b'"video_id": "v1", "video_id": "v2"'),  # a duplicate key
    full_bytes.replace(b'"video_id": "v1"', b'"video_id": "\\ud800"'),  # a lone surrogate
    full_bytes.replace(b'"video_id": "v1"', b'"video_id": "v\xff1"'),  # not UTF-8
    full_bytes.replace(b'"video_id": "v1"', b'"video_id": "v\x011"'),  # a raw control character
    b"\xef\xbb\xbf" + full_bytes,
    full_bytes.decode().encode("utf-16"),  # a BOM; another encoding
    raw(full(error="boom", score=None)),
    raw(full(error="boom")),  # error rows (valid events)
]


def model(value: bytes | None) -> dict | str:
    """What the model makes of ``value``: its fields, or "invalid"."""
    try:
        return dict(vars(ScoreEvent.model_validate_json(value or b"")))
    except ValueError:
        return "invalid"


def decoded(value: bytes | None) -> dict | str:
    try:
        return dict(score_fields(value))
    except ValueError:
        return "invalid"


def same(a: dict | str, b: dict | str) -> bool:
    """Equal, with the same types, a NaN equal to a NaN."""
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    nan = lambda x: isinstance(x, float) and math.isnan(x)  # noqa: E731
    equal = lambda x, y: type(x) is type(y) and (x == y or (nan(x) and nan(y)))  # noqa: E731
    return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)


def test_well_formed_score_events_take_the_fast_path_with_the_models_values():
    for value in WELL_FORMED:
        assert fast_fields(value) is not None, value
        assert same(decoded(value), model(value)), value
    assert fast_fields(raw(minimal()))["canary"] is False  # defaults filled in


@pytest.mark.parametrize("value", MALFORMED)
def test_malformed_score_events_come_out_as_the_model_makes_them(value):
    want = model(value)
    assert same(decoded(value), want)
    if want == "invalid":
        assert fast_fields(value) is None  # the fast path never takes what the model refuses


def test_the_model_refuses_many_of_them():
    outcomes = Counter("invalid" if model(v) == "invalid" else "valid" for v in MALFORMED)
    assert outcomes["invalid"] >= 30 and outcomes["valid"] >= 10


def _reference(topic: str, records: list[bus.Record], store: Store, clock) -> tuple[int, dict]:
    """The monitor's ingest before the fast path: one model and one ``add_score`` per event."""
    invalid, seen = 0, {}
    for msg in records:
        if msg.topic == topic and msg.timestamp_ms is not None:
            tp = msg.topic_partition
            seen[tp] = max(seen.get(tp, float("-inf")), msg.timestamp_ms / 1000)
        ts = msg.timestamp_ms
        fallback = ts / 1000 if ts is not None and ts >= 0 else clock()
        try:
            if msg.topic == topic:
                store.add_score(ScoreEvent.model_validate_json(msg.value or b""), fallback)
            else:
                event = LabelEvent.model_validate_json(msg.value or b"")
                store.add_label(event.video_id, event.label, fallback)
        except ValueError:
            invalid += 1
    return invalid, seen


def _records(cfg: MonitorConfig, rng: np.random.Generator) -> list[bus.Record]:
    """Score events of 40 videos x 2 detectors x 2 conditions (some redelivered, some expired, some error rows)
    on 3 partitions, the malformed ones among them, and labels, in a random order."""
    values = []
    for i in range(40):
        vid, t = f"v{i}", NOW - (5000 if i % 13 == 0 else 100 - i)
        for det in ("npr", "d3"):
            for cond in ("original", "full"):
                s = float(np.round(rng.normal(), 3))
                key = idempotency_key(vid, cond, det, "1")
                fields = full(video_id=vid, detector=det, condition=cond, score=s, decision=s > 0, event_time=t,
                              label=(None, "real", "generated")[i % 3], idempotency_key=key)  # fmt: skip
                values += [raw(fields)] * (2 if rng.random() < 0.2 else 1)
        if i % 7 == 0:
            values.append(raw(full(video_id=vid, error="boom", score=None)))
    values += MALFORMED
    out = []
    for n, i in enumerate(rng.permutation(len(values))):
        ts = None if n % 11 == 0 else int((NOW - 50) * 1000) + n
        out.append(bus.Record(cfg.kafka.output_topic, n % 3, n, ts, None, values[i]))
        if n % 9 == 0:
            label = json.dumps({"video_id": f"v{(n // 9) % 45}", "label": ("real", "generated")[n % 2]}).encode()
            out.append(bus.Record(cfg.kafka.labels_topic, 0, n, int((NOW - 80) * 1000), None, label))
    return out


def test_a_poll_kept_together_counts_and_holds_what_one_event_at_a_time_did():
    cfg = MonitorConfig(http_port=0, windows=WindowSettings(seconds=600, label_ttl_s=60))
    clock = lambda: NOW  # noqa: E731
    records = _records(cfg, np.random.default_rng(5))
    mon = Monitor(cfg, clock)
    rows = [bus.RecordView(r) for r in records]  # as the monitor's reader hands them out
    for start in range(0, len(rows), 37):  # polls of 37 records
        mon.take(rows[start : start + 37])
    ref = Store(cfg.windows, clock, lambda: mon._watermark)  # the watermark the monitor gives its store
    invalid, seen = _reference(cfg.kafka.output_topic, records, ref, clock)
    got_invalid = mon.metrics.registry.get_sample_value(
        "lastmile_monitor_invalid_messages_total", {"topic": cfg.kafka.output_topic}
    )
    assert got_invalid == invalid and invalid >= 30
    assert mon.store.events == ref.events and mon.store.labels == ref.labels
    assert ref.events["duplicate"] > 0 and ref.events["expired"] > 0 and ref.events["error_row"] > 0
    assert mon._seen == seen
    assert mon.store.snapshot() == ref.snapshot()
    got, want = mon.store.frame(), ref.frame()
    assert list(got.rows) == list(want.rows)
    for series, arrays in want.rows.items():
        for a, b in zip(got.rows[series], arrays, strict=True):
            np.testing.assert_array_equal(a, b)


def test_add_scores_dedups_within_a_batch_and_against_what_is_held():
    store, ref = Store(WindowSettings(seconds=600), lambda: NOW), Store(WindowSettings(seconds=600), lambda: NOW)
    rows = [ScoreEvent(**full(video_id=f"v{i % 5}", score=float(i), event_time=NOW - i)) for i in range(12)]
    store.add_scores([(vars(r), NOW) for r in rows[:3]])
    store.add_scores([(vars(r), NOW) for r in rows])
    for r in rows[:3] + rows:
        ref.add_score(r, NOW)
    assert store.events == ref.events == Counter(added=5, duplicate=10)
    assert store.snapshot() == ref.snapshot()


@pytest.mark.parametrize("score", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e400"])
def test_a_score_of_nan_or_an_infinity_is_an_invalid_event_on_both_paths(score):
    """No AUC or verdict can be made of it: one such event used to reach the store and fail every windowed
    series until it left the window. The fast path stays on for the finite rest."""
    value = full_bytes.replace(b'"score": 0.25', b'"score": ' + score)
    assert model(value) == "invalid" and decoded(value) == "invalid" and fast_fields(value) is None
    assert fast_fields(full_bytes) is not None
