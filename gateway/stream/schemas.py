"""Values in the Confluent wire format (a zero byte, the writer schema's 4-byte id, then the encoded value), as a
platform's upload events come when a Schema Registry frames them: decoded to plain dicts for the input mapping.

- Avro: with ``registry``, confluent-kafka's ``AvroDeserializer`` asks the registry for the writer schema by its
  id (and caches it); with ``schema_file`` (``.avsc``), the value is read with that schema (fastavro, as the
  deserializer reads it), the framing checked.
- Protobuf: the message type comes from ``schema_file``, a descriptor set (``protoc --descriptor_set_out``,
  ``buf build -o``) and ``message`` (its full name); confluent-kafka's ``ProtobufDeserializer`` reads the framing
  and its message indexes. Fields keep their ``.proto`` names.

A value that cannot be decoded raises :class:`UndecodableValue` (the record's dead letter says why); a registry
that cannot be reached raises it too, naming the registry (the dead letter keeps the value for a replay).
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from transforms.support.config_errors import ConfigError, one_line

MAGIC = 0
HEADER_BYTES = 5

Decode = Callable[[bytes, str], Any]


class SchemaFileError(ConfigError):
    """``input.schema_file`` (or ``input.message``) cannot be used: missing, unreadable, or no schema of its kind."""


class UndecodableValue(ValueError):
    """A value that is not an event of the configured schema (no wire-format framing, a schema that does not read
    it, an unknown schema id, or a registry that did not answer)."""


def decoder(
    format: Literal["avro", "protobuf"],
    registry: dict[str, str] | None = None,
    schema_file: Path | None = None,
    message: str | None = None,
) -> Decode:
    """``decode(value, topic) -> dict`` for ``format``; ``registry``: the Schema Registry client's configuration
    (``url``, and ``basic.auth.user.info`` and the like)."""
    if format == "avro" and registry:
        return _avro_registry(registry)
    if schema_file is None:
        raise SchemaFileError(f"input.format {format} needs input.schema_file")
    try:
        return _avro_file(schema_file) if format == "avro" else _protobuf(schema_file, message or "", registry)
    except SchemaFileError:
        raise
    except Exception as exc:  # a missing file, no JSON, fastavro's or protobuf's refusal of what it holds
        kind = "an Avro schema (.avsc)" if format == "avro" else "a protobuf descriptor set"
        raise SchemaFileError(f"input.schema_file {schema_file} cannot be read as {kind}: {one_line(exc)}") from exc


def _framed(value: bytes) -> int:
    """The writer schema's id, if ``value`` is in the wire format."""
    if len(value) < HEADER_BYTES or value[0] != MAGIC:
        raise UndecodableValue("the value is not in the Confluent wire format (a zero byte, then a 4-byte schema id)")
    return int.from_bytes(value[1:HEADER_BYTES], "big")


def _avro_file(path: Path) -> Decode:
    import fastavro

    schema = fastavro.parse_schema(json.loads(path.read_text()))

    def decode(value: bytes, topic: str) -> Any:
        _framed(value)
        try:
            return fastavro.schemaless_reader(io.BytesIO(value[HEADER_BYTES:]), schema, None)
        except Exception as exc:  # fastavro raises what its reader met: EOF, a bad union index, bad UTF-8
            raise UndecodableValue(f"the value does not read with {path.name}: {type(exc).__name__}: {exc}") from exc

    return decode


def _avro_registry(registry: dict[str, str]) -> Decode:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer

    deserialize = AvroDeserializer(SchemaRegistryClient(dict(registry)))
    return _through(deserialize, registry.get("url", ""))


def _protobuf(path: Path, message: str, registry: dict[str, str] | None) -> Decode:
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    from google.protobuf.json_format import MessageToDict

    pool = descriptor_pool.DescriptorPool()
    for file in descriptor_pb2.FileDescriptorSet.FromString(path.read_bytes()).file:
        pool.Add(file)
    try:
        cls = message_factory.GetMessageClass(pool.FindMessageTypeByName(message))
    except KeyError as exc:
        raise SchemaFileError(f"input.message {message!r} is not in {path.name}") from exc
    deserialize = ProtobufDeserializer(cls, {"use.deprecated.format": False})
    read = _through(deserialize, (registry or {}).get("url", ""))
    return lambda value, topic: MessageToDict(read(value, topic), preserving_proto_field_name=True)


def _through(deserialize: Callable[..., Any], registry_url: str) -> Decode:
    from confluent_kafka.serialization import MessageField, SerializationContext

    def decode(value: bytes, topic: str) -> Any:
        _framed(value)
        try:
            return deserialize(value, SerializationContext(topic, MessageField.VALUE))
        except Exception as exc:  # SerializationError, SchemaRegistryError, the registry's connection errors
            where = f" (registry {registry_url})" if registry_url else ""
            raise UndecodableValue(f"undecodable value{where}: {type(exc).__name__}: {exc}") from exc

    return decode
