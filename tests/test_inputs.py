"""A platform's own upload events read as video events (``input:``): the JMESPath mapping, the Avro and Protobuf
decoders of the Confluent wire format, and what a record that does not map becomes (a refusal naming the field and
its expression)."""

from __future__ import annotations

import json

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from pydantic import ValidationError

from gateway import bus
from gateway.core.config import GatewayConfig, MessageSettings
from gateway.core.inputs import InputSettings, map_message
from gateway.core.messages import InvalidMessage
from gateway.stream import records
from gateway.stream.inputs import EventReader
from tests.support.uploads import AVRO_FIELDS, AVRO_SCHEMA, avro_value

UPLOAD = {  # an upload event as a platform's own service writes it (nested, its own names)
    "type": "upload.completed",
    "time": "2026-12-06T05:00:00Z",
    "detail": {
        "upload": {"id": "u-981", "moderation": {"label": "generated"}},
        "object": {"bucket": "uploads", "key": "videos/u-981.mp4", "sha256": "ab" * 32},
    },
}
FIELDS = {
    "video_id": "detail.upload.id",
    "bucket": "detail.object.bucket",
    "key": "detail.object.key",
    "label": "detail.upload.moderation.label",
    "event_time": "time",
    "sha256": "detail.object.sha256",
}
JSON_INPUT = InputSettings(format="json", fields=FIELDS, store="s3")


def test_a_nested_upload_event_maps_to_the_video_event():
    mapped = map_message(UPLOAD, JSON_INPUT)
    assert mapped.event.video_id == "u-981"
    assert mapped.event.uri == "s3://uploads/videos/u-981.mp4"
    assert mapped.event.label == "generated"
    assert mapped.event.sha256 == "ab" * 32
    assert mapped.event_time == 1796533200.0  # 2026-12-06T05:00:00Z


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda e: e["detail"]["upload"].pop("id"), "fields.video_id: expression 'detail.upload.id' found nothing"),
        (lambda e: e["detail"]["object"].update(key=7), "fields.key: expression 'detail.object.key' found 7, not"),
        (lambda e: e["detail"]["upload"]["moderation"].update(label="maybe"), "input.fields.label: expression"),
        (lambda e: e.update(time="yesterday"), "input.fields.event_time: expression 'time' found 'yesterday'"),
        (lambda e: e["detail"]["object"].update(sha256="xyz"), "sha256"),
    ],
)
def test_a_message_that_does_not_map_names_the_field_and_its_expression(change, said):
    event = json.loads(json.dumps(UPLOAD))
    change(event)
    with pytest.raises(InvalidMessage) as caught:
        map_message(event, JSON_INPUT)
    assert said in str(caught.value)


@pytest.mark.parametrize(("value", "seconds"), [(1796533200, 1796533200.0), (1796533200500, 1796533200.5)])
def test_an_event_time_in_seconds_or_milliseconds_maps_to_seconds(value, seconds):
    assert map_message({**UPLOAD, "time": value}, JSON_INPUT).event_time == seconds


def test_a_whole_uri_maps_as_it_is_and_numbers_are_ids():
    settings = InputSettings(fields={"video_id": "id", "uri": "location"})
    mapped = map_message({"id": 42, "location": "az://media/clips/a.mp4"}, settings)
    assert (mapped.event.video_id, mapped.event.uri, mapped.event_time) == ("42", "az://media/clips/a.mp4", None)


@pytest.mark.parametrize(
    ("setting", "said"),
    [
        ({"fields": {"video_id": "detail.[", "uri": "u"}}, "JMESPath expression 'detail.[' does not parse"),
        ({"fields": {"video_id": "id"}}, "either 'uri', or 'bucket' and 'key'"),
        ({"fields": {"video_id": "id", "bucket": "b", "key": "k"}}, "input.store says which store"),
        ({"format": "avro", "fields": {"video_id": "id", "uri": "u"}}, "schema_registry or input.schema_file"),
        ({"format": "avro"}, "needs input.fields"),
        ({"format": "protobuf", "fields": {"video_id": "id", "uri": "u"}, "schema_file": "x.desc"}, "input.message"),
    ],
)
def test_a_mapping_that_cannot_work_is_refused_with_the_configuration(setting, said):
    with pytest.raises(ValidationError) as caught:
        GatewayConfig.model_validate({"input": setting})
    assert said in str(caught.value)


def test_without_input_the_projects_own_event_is_read():
    reader = EventReader()
    event, inline, when = reader.read(b'{"video_id": "v1", "uri": "s3://uploads/videos/a.mp4"}', [], "t")
    assert (event.video_id, event.uri, inline, when) == ("v1", "s3://uploads/videos/a.mp4", None, None)
    with pytest.raises(InvalidMessage, match=r"unknown field 'type'"):
        reader.read(json.dumps(UPLOAD).encode(), [], "t")


def _record(value: bytes, stamp_ms: int = 1000) -> bus.Record:
    return bus.Record("uploads", 0, 7, stamp_ms, b"k", value, [])


def test_the_tap_refuses_a_record_that_does_not_map_with_the_expression_and_keeps_its_value():
    reader = EventReader(JSON_INPUT)
    value = json.dumps({"detail": {}}).encode()
    got = records.read(_record(value), 1_000_000, MessageSettings(), reader)
    assert isinstance(got, records.Refusal)
    assert got.error_class == "InvalidMessage" and got.value == value
    assert "input.fields.video_id: expression 'detail.upload.id' found nothing" in got.reason


def test_the_tap_reads_a_mapped_record_with_the_events_own_time():
    got = records.read(_record(json.dumps(UPLOAD).encode()), 1_000_000, MessageSettings(), EventReader(JSON_INPUT))
    assert isinstance(got, records.Video)
    assert got.event.uri == "s3://uploads/videos/u-981.mp4" and got.event_time == 1796533200.0


def test_mapped_fields_keep_the_messages_bounds():
    long_key = {**UPLOAD, "detail": {**UPLOAD["detail"], "object": {"bucket": "uploads", "key": "k" * 9000}}}
    with pytest.raises(InvalidMessage, match=r"longer than 8192 bytes"):
        EventReader(JSON_INPUT).read(json.dumps(long_key).encode(), [], "t")


# -- Avro and Protobuf in the Confluent wire format -------------------------------------------------------------
AVRO_RECORD = {"upload_id": "u-7", "object": {"bucket": "uploads", "key": "videos/u-7.mp4"}, "label": "real"}


def test_an_avro_event_read_with_its_schema_file_maps(tmp_path):
    (tmp_path / "upload.avsc").write_text(json.dumps(AVRO_SCHEMA))
    settings = InputSettings(format="avro", fields=AVRO_FIELDS, store="s3", schema_file=tmp_path / "upload.avsc")
    event, _, _ = EventReader(settings).read(avro_value(AVRO_RECORD), [], "uploads")
    assert (event.video_id, event.uri, event.label) == ("u-7", "s3://uploads/videos/u-7.mp4", "real")
    with pytest.raises(InvalidMessage, match=r"input.format avro: the value is not in the Confluent wire format"):
        EventReader(settings).read(json.dumps(AVRO_RECORD).encode(), [], "uploads")
    with pytest.raises(InvalidMessage, match=r"does not read with upload.avsc"):
        EventReader(settings).read(b"\0\0\0\0\1" + b"\xff" * 3, [], "uploads")


def _descriptor_set(path) -> None:
    """A descriptor set, as ``protoc --descriptor_set_out`` writes it, of ``platform.Upload``."""
    file = descriptor_pb2.FileDescriptorProto(name="upload.proto", package="platform", syntax="proto3")
    message = file.message_type.add(name="Upload")
    string = descriptor_pb2.FieldDescriptorProto.TYPE_STRING
    for number, name in enumerate(("upload_id", "object_uri"), start=1):
        message.field.add(name=name, number=number, type=string, label=1)
    path.write_bytes(descriptor_pb2.FileDescriptorSet(file=[file]).SerializeToString())


def test_a_protobuf_event_read_with_its_descriptor_set_maps(tmp_path):
    _descriptor_set(tmp_path / "upload.desc")
    settings = InputSettings(
        format="protobuf",
        fields={"video_id": "upload_id", "uri": "object_uri"},
        schema_file=tmp_path / "upload.desc",
        message="platform.Upload",
    )
    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString((tmp_path / "upload.desc").read_bytes()).file:
        pool.Add(file)
    upload = message_factory.GetMessageClass(pool.FindMessageTypeByName("platform.Upload"))
    payload = upload(upload_id="u-9", object_uri="az://media/clips/u-9.mp4").SerializeToString()
    value = b"\0" + (3).to_bytes(4, "big") + b"\0" + payload  # framing, message indexes [0] (the first message)
    event, _, _ = EventReader(settings).read(value, [], "uploads")
    assert (event.video_id, event.uri) == ("u-9", "az://media/clips/u-9.mp4")
    with pytest.raises(ValueError, match=r"'platform.Nothing' is not in upload.desc"):
        EventReader(settings.model_copy(update={"message": "platform.Nothing"}))
