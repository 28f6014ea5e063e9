"""A platform's upload event in Avro, framed as a Schema Registry frames it (the Confluent wire format): shared by
`tests/test_inputs.py`, `tests/test_input_check.py` and `tests/test_attach.py`."""

from __future__ import annotations

import io

import fastavro

AVRO_SCHEMA = {
    "type": "record",
    "name": "UploadCompleted",
    "namespace": "platform.uploads",
    "fields": [
        {"name": "upload_id", "type": "string"},
        {
            "name": "object",
            "type": {
                "type": "record",
                "name": "Object",
                "fields": [{"name": "bucket", "type": "string"}, {"name": "key", "type": "string"}],
            },
        },
        {"name": "label", "type": ["null", "string"], "default": None},
    ],
}
AVRO_FIELDS = {"video_id": "upload_id", "bucket": "object.bucket", "key": "object.key", "label": "label"}


def avro_value(record: dict, schema_id: int = 1) -> bytes:
    """``record`` in the wire format: a zero byte, the schema's id in 4 bytes, the Avro binary encoding."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(AVRO_SCHEMA), record)
    return b"\0" + schema_id.to_bytes(4, "big") + out.getvalue()
