"""The tap attached to a platform's own upload stream (docs/attach.md), end to end: `lastmile gateway run` reads
nested JSON and Avro upload events, maps them with ``input:``, reads the clips from moto's S3 server and Azurite,
and scores them under all six conditions; refusals are dead letters naming the store and the key (or the
expression); a store that answers 503 first is retried, not a verdict; no credential reaches a row, a dead letter
or a log.

Stack layer: two gateway processes, a broker, moto and Azurite."""

from __future__ import annotations

import hashlib
import json
import signal
from pathlib import Path

import boto3
import pytest
from azure.storage.blob import BlobServiceClient

from gateway import bus
from gateway.core.config import GatewayConfig, KafkaSettings
from gateway.core.messages import ScoreEvent
from tests.support.stores import AZURITE_KEY, S3_ENV, Proxy, azurite, moto_s3
from tests.support.streaming import FAST_GROUP, gateway_process, read_topics
from tests.support.uploads import AVRO_FIELDS, AVRO_SCHEMA, avro_value

SECRET = "planted-secret-9c41e7d2"  # the AWS secret key the gateways sign with: found nowhere they write
CLIP = Path(__file__).resolve().parents[1] / "examples/videos/a7_0000.mp4"
CONDITIONS = ("original", "transcode", "spatial", "temporal", "presentation", "full")
DETECTOR = "spectral"


def upload(video_id: str, bucket: str, key: str) -> bytes:
    """An upload event as a platform's service writes it: nested, its own names."""
    detail = {"upload": {"id": video_id, "moderation": {"label": "real"}}, "object": {"bucket": bucket, "key": key}}
    return json.dumps({"type": "upload.completed", "time": "2026-12-06T05:00:00Z", "detail": detail}).encode()


JSON_FIELDS = {
    "video_id": "detail.upload.id",
    "bucket": "detail.object.bucket",
    "key": "detail.object.key",
    "label": "detail.upload.moderation.label",
    "event_time": "time",
}


def _config(broker, name: str, **settings) -> GatewayConfig:
    kafka = KafkaSettings(
        bootstrap=broker.bootstrap,
        input_topic=f"{name}.uploads",
        output_topic=f"{name}.scores",
        group_id=f"{name}-gw",
        **FAST_GROUP,
    )
    cfg = GatewayConfig(
        kafka=kafka,
        conditions="all",
        detectors=DETECTOR,
        profile="throughput",
        http_port=0,
        retry_backoff_s=0.2,
        **{"workers": 2, **settings},
    )
    bus.ensure_topics(cfg.kafka, partitions=1)
    return cfg


@pytest.fixture
def stores(tmp_path, monkeypatch):
    """moto (behind a proxy whose first 4 answers are 503 SlowDown) and Azurite, each holding the clip."""
    for k, v in {**S3_ENV, "AWS_SECRET_ACCESS_KEY": SECRET}.items():
        monkeypatch.setenv(k, v)
    data = CLIP.read_bytes()
    with moto_s3(tmp_path / "moto.log") as endpoint, azurite(tmp_path / "azurite") as connection:
        s3 = boto3.client("s3", endpoint_url=endpoint)
        s3.create_bucket(Bucket="uploads")
        s3.put_object(Bucket="uploads", Key="videos/clip.mp4", Body=data)
        s3.put_object(Bucket="uploads", Key="private/clip.mp4", Body=data)
        s3.create_bucket(Bucket="locked")
        s3.put_object(Bucket="locked", Key="videos/clip.mp4", Body=data)
        deny = {"Effect": "Deny", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::locked/*"}
        s3.put_bucket_policy(Bucket="locked", Policy=json.dumps({"Version": "2012-10-17", "Statement": [deny]}))
        blobs = BlobServiceClient.from_connection_string(connection)
        blobs.create_container("media")
        blobs.get_blob_client("media", "clips/clip.mp4").upload_blob(data)
        monkeypatch.setenv("AZURE_STORAGE_CONNECTION_STRING", connection)
        # 4 answers: a request and the SDK's 3 retries, so the gateway's own retry (the store down) is what reads it
        with Proxy(endpoint, fail=4) as proxy:
            yield proxy


def test_upload_events_from_object_stores_are_scored_and_refusals_name_the_store_and_key(broker, tmp_path, stores):
    proxy = stores
    s3_cfg = _config(
        broker,
        "attach-json",
        input={"format": "json", "store": "s3", "fields": JSON_FIELDS},
        sources={"object_stores": ["s3://uploads/videos/", "s3://locked/"], "s3_endpoint_url": proxy.url},
        workers=1,  # (one worker: the first video's 4 requests are the proxy's 4 answers of 503)
    )
    (tmp_path / "upload.avsc").write_text(json.dumps(AVRO_SCHEMA))
    avro_cfg = _config(
        broker,
        "attach-avro",
        input={"format": "avro", "store": "az", "schema_file": str(tmp_path / "upload.avsc"), "fields": AVRO_FIELDS},
        sources={"object_stores": ["az://media/clips/"]},
    )
    gateways = [gateway_process(cfg, tmp_path, name) for cfg, name in ((s3_cfg, "json"), (avro_cfg, "avro"))]
    try:
        producer = bus.producer(s3_cfg.kafka)
        events = {
            "good": upload("good", "uploads", "videos/clip.mp4"),
            "outside": upload("outside", "uploads", "private/clip.mp4"),
            "missing": upload("missing", "uploads", "videos/none.mp4"),
            "denied": upload("denied", "locked", "videos/clip.mp4"),
            "unmapped": json.dumps({"detail": {"object": {"bucket": "uploads", "key": "videos/clip.mp4"}}}).encode(),
        }
        for key, value in events.items():
            producer.send(s3_cfg.kafka.input_topic, value, key=key.encode())
        blob = {"upload_id": "blob", "object": {"bucket": "media", "key": "clips/clip.mp4"}, "label": "real"}
        producer.send(avro_cfg.kafka.input_topic, avro_value(blob), key=b"blob")
        producer.flush()

        json_k, avro_k = s3_cfg.kafka, avro_cfg.kafka
        topics = [json_k.output_topic, json_k.dlq, avro_k.output_topic]
        got = read_topics(
            broker.bootstrap,
            topics,
            lambda g: len(g[json_k.dlq]) >= 4 and all(_scored(g[t]) >= len(CONDITIONS) for t in topics[::2]),
            timeout_s=240,
        )
    finally:
        for process, _ in gateways:
            process.send_signal(signal.SIGTERM)
        for process, _ in gateways:
            process.wait(60)

    for topic, video in ((json_k.output_topic, "good"), (avro_k.output_topic, "blob")):
        scores = [ScoreEvent.model_validate_json(m.value) for m in got[topic]]
        ok = {e.condition for e in scores if e.video_id == video and e.error is None and e.score is not None}
        assert ok == set(CONDITIONS), (topic, [(e.condition, e.error) for e in scores])
        assert all(e.input_sha256 == _sha256(CLIP) and e.label == "real" for e in scores if e.video_id == video)
    json_scores = [ScoreEvent.model_validate_json(m.value) for m in got[json_k.output_topic]]
    assert all(e.event_time == 1796533200.0 for e in json_scores if e.video_id == "good")  # the upload's own time

    letters = {m.key.decode(): dict(m.headers) for m in got[json_k.dlq]}
    reason = {k: v["lastmile-error-message"].decode() for k, v in letters.items()}
    assert "bucket 'uploads', key 'private/clip.mp4': outside sources.object_stores" in reason["outside"]
    assert "bucket 'uploads', key 'videos/none.mp4' (s3): no such object" in reason["missing"]
    assert "bucket 'locked', key 'videos/clip.mp4' (s3): access denied" in reason["denied"]
    assert "input.fields.video_id: expression 'detail.upload.id' found nothing" in reason["unmapped"]
    assert letters["unmapped"]["lastmile-error-class"] == b"InvalidMessage"
    assert {letters[k]["lastmile-error-class"] for k in ("outside", "missing", "denied")} == {b"SourceError"}

    # the 503s were retried by the gateway (the store down, then up), and no verdict was made of them
    assert proxy.requests[:4] == ["HEAD"] * 4
    logs = {name: log.read_text() for (_, log), name in zip(gateways, ("json", "avro"), strict=True)}
    assert "store unavailable" in logs["json"] and "store available again" in logs["json"]
    written = b"".join(m.value + b"".join(v or b"" for _, v in m.headers) for t in topics for m in got[t])
    for secret in (SECRET, AZURITE_KEY):
        assert secret.encode() not in written
        assert all(secret not in text for text in logs.values())


def _scored(messages: list) -> int:
    return sum(1 for m in messages if json.loads(m.value).get("error") is None)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
