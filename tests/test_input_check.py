"""``lastmile input check``: a team tries its mapping on a sample before it deploys; and Avro events whose writer
schema a Schema Registry serves (a registry of the test's own, over real HTTP: the Schema Registry's REST API for
a schema by its id, as confluent-kafka's client asks it; no Confluent registry can run here).

Process layer: the command line in a subprocess."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
import yaml

from gateway.core.inputs import InputSettings
from gateway.stream.inputs import EventReader
from tests.support.stores import serving
from tests.support.uploads import AVRO_FIELDS, AVRO_SCHEMA, avro_value

UPLOAD = {
    "detail": {"upload": {"id": "u-1", "label": "real"}, "object": {"bucket": "uploads", "key": "videos/u-1.mp4"}},
    "time": 1796533200,
}
CONFIG = {
    "sources": {"object_stores": ["s3://uploads/videos/"]},
    "input": {
        "store": "s3",
        "fields": {
            "video_id": "detail.upload.id",
            "bucket": "detail.object.bucket",
            "key": "detail.object.key",
            "label": "detail.upload.label",
            "event_time": "time",
        },
    },
}


def _check(tmp_path, sample: bytes, config: dict = CONFIG) -> subprocess.CompletedProcess:
    (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(config))
    (tmp_path / "sample").write_bytes(sample)
    cmd = [sys.executable, "-m", "gateway.cli", "input", "check", "--config", "gateway.yaml", "sample"]
    return subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=60)


def test_a_good_sample_prints_the_mapped_fields(tmp_path):
    done = _check(tmp_path, json.dumps(UPLOAD).encode())
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(None, 1) for line in done.stdout.splitlines())
    assert lines["video_id:"] == "u-1"
    assert lines["uri:"] == "s3://uploads/videos/u-1.mp4"
    assert lines["label:"] == "real"
    assert lines["event_time:"].startswith("1796533200.0 (2026-12-06T05:00:00+00:00)")
    assert lines["sources:"].startswith("the gateway may read it")


def test_a_wrong_mapping_names_the_expression_and_exits_2(tmp_path):
    config = json.loads(json.dumps(CONFIG))
    config["input"]["fields"]["video_id"] = "detail.upload.uid"
    done = _check(tmp_path, json.dumps(UPLOAD).encode(), config)
    assert done.returncode == 2 and done.stdout == ""
    assert "input.fields.video_id: expression 'detail.upload.uid' found nothing in the message" in done.stderr


def test_a_video_outside_the_stores_is_said_and_exits_2(tmp_path):
    config = {**CONFIG, "sources": {"object_stores": ["s3://uploads/other/"]}}
    done = _check(tmp_path, json.dumps(UPLOAD).encode(), config)
    assert done.returncode == 2
    assert "bucket 'uploads', key 'videos/u-1.mp4': outside sources.object_stores (s3://uploads/other/)" in done.stderr


def registry_handler(schemas: dict[int, dict], asked: list[str]) -> type[http.server.BaseHTTPRequestHandler]:
    """The Schema Registry's ``GET /schemas/ids/{id}`` for the ``schemas`` given; every path asked kept."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            asked.append(self.path)
            parts = self.path.split("?")[0].strip("/").split("/")
            found = parts[:2] == ["schemas", "ids"] and int(parts[2]) in schemas
            if found:
                body = {"schemaType": "AVRO", "schema": json.dumps(schemas[int(parts[2])])}
            else:
                body = {"error_code": 40403, "message": "Schema not found"}
            data = json.dumps(body).encode()
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


@pytest.fixture
def registry():
    asked: list[str] = []
    with serving(registry_handler({7: AVRO_SCHEMA}, asked)) as url:
        yield SimpleNamespace(url=url, asked=asked)


def test_an_avro_event_is_read_with_the_writer_schema_its_registry_serves(registry):
    settings = InputSettings(format="avro", store="s3", fields=AVRO_FIELDS, schema_registry={"url": registry.url})
    reader = EventReader(settings)
    record = {"upload_id": "u-7", "object": {"bucket": "uploads", "key": "videos/u-7.mp4"}, "label": "generated"}
    event, _, _ = reader.read(avro_value(record, schema_id=7), [], "uploads")
    assert (event.video_id, event.uri, event.label) == ("u-7", "s3://uploads/videos/u-7.mp4", "generated")
    assert any(p.startswith("/schemas/ids/7") for p in registry.asked)
    from gateway.core.messages import InvalidMessage

    with pytest.raises(InvalidMessage) as caught:  # a schema id the registry does not hold
        reader.read(avro_value(record, schema_id=99), [], "uploads")
    assert f"registry {registry.url}" in str(caught.value) and "Schema not found" in str(caught.value)


def test_input_check_reads_an_avro_sample_through_the_registry(tmp_path, registry):
    config = {**CONFIG, "input": {"format": "avro", "store": "s3", "fields": AVRO_FIELDS}}
    config["input"]["schema_registry"] = {"url": registry.url}
    record = {"upload_id": "u-8", "object": {"bucket": "uploads", "key": "videos/u-8.mp4"}, "label": None}
    done = _check(tmp_path, avro_value(record, schema_id=7), config)
    assert done.returncode == 0, done.stderr
    assert "uri:        s3://uploads/videos/u-8.mp4" in done.stdout
