"""Record batches (Kafka's message format v2) parsed here, for a reader that fetches on its own sockets
(:mod:`gateway.bus.batch_reader`): about five times cheaper per record than kafka-python's decoder, which builds a
record object, a consumer record and a header list for each.

The format (Kafka's ``DefaultRecordBatch``): a 61-byte header (base offset, length, leader epoch, magic, CRC-32C
of everything after it, attributes, last offset delta, first and max timestamp, producer id and epoch, base
sequence, record count), then each record as a zigzag-varint length, attributes, timestamp delta, offset delta,
key, value and headers. The CRC is checked on every batch. An uncompressed batch is parsed here; a compressed one
is handed to kafka-python's decoder (:func:`gateway.bus.records.from_batch`), which has the codecs. Control
batches (transaction markers) hold no records to hand out. A fetch reply may end with a batch cut short: it is
left for the next fetch.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from crc32c import crc32c

from gateway.bus.records import OversizeRecord, Record, UnreadableRecord, from_batch

HEADER = struct.Struct(">qiibIhiqqqhii")  # the batch header's fields, as listed above
OFFSET_LENGTH = struct.Struct(">qi")  # base offset and length: enough to find where a batch ends
LOG_OVERHEAD = 12  # base offset and length, not counted in a batch's length
CRC_FROM = 21  # the CRC covers the batch from its attributes on
MAGIC_AT = 16  # the message format's byte: after base offset, length and leader epoch
MIN_RECORD_BYTES = 7  # length, attributes, timestamp and offset deltas, key, value and header counts: a byte each
COMPRESSION_MASK, LOG_APPEND_TIME, CONTROL = 0x07, 0x08, 0x20


class BatchFormatError(ValueError):
    """A batch that cannot be read: a failed CRC, another magic, or records that do not fit its length."""


@dataclass
class Parsed:
    """The records of a fetch's batches from a start offset on, and where the next fetch starts."""

    records: list[Record | UnreadableRecord | OversizeRecord] = field(default_factory=list)
    next_offset: int = 0  # after the last whole batch (or the start, if none was whole)


def parse(topic: str, partition: int, data: bytes, start: int, limit: int | None = None) -> Parsed:
    """The records at or after ``start`` in the batches of ``data`` (a fetch reply's record set). A batch that
    cannot be read comes as one :class:`UnreadableRecord` per offset it spans (reason included), so a reader
    moves past it and says why, as the consumer does with a record its client cannot decode; a batch over
    ``limit`` bytes as one :class:`OversizeRecord` per offset, as the consumer hands out a batch it cannot
    fetch (so the two readers agree on what the limit lets through)."""
    out = Parsed(next_offset=start)
    view, pos, size = memoryview(data), 0, len(data)
    while pos + LOG_OVERHEAD <= size:
        base, length = OFFSET_LENGTH.unpack_from(view, pos)
        end = pos + LOG_OVERHEAD + length
        if end > size or length < 0:
            break  # cut short by the fetch size: the next fetch starts at it
        if length < HEADER.size - LOG_OVERHEAD or view[pos + MAGIC_AT] != 2:  # an older format, or no batch
            out.records += _legacy(topic, partition, data[pos:end], base, start)
            out.next_offset = max(out.next_offset, base + 1, *(r.offset + 1 for r in out.records[-1:]))
            pos = end
            continue
        header = HEADER.unpack_from(view, pos)
        last = base + header[6]
        first = max(base, start)
        if not 0 <= header[6] <= length // MIN_RECORD_BYTES:  # a span no batch of this length can hold: only the
            last = first  # CRC could vouch for it, and it cannot be right; one offset at a time
        if last >= start and limit is not None and end - pos > limit:
            out.records += [OversizeRecord(topic, partition, o, end - pos, limit) for o in range(first, last + 1)]
        elif last >= start:
            try:
                out.records += _batch(topic, partition, data, pos, end, header, start)
            except (BatchFormatError, ValueError, IndexError) as exc:
                reason = f"unreadable record batch at offset {base} of {topic}/{partition}: {exc}"
                out.records += [UnreadableRecord(topic, partition, o, reason) for o in range(first, last + 1)]
        out.next_offset = max(out.next_offset, last + 1)
        pos = end
    return out


def _legacy(topic: str, partition: int, data: bytes, base: int, start: int) -> list[Record | UnreadableRecord]:
    """A message set of format 0 or 1 (or bytes that are no batch): kafka-python's decoder reads the former."""
    try:
        return from_batch(topic, partition, data, start)
    except Exception as exc:  # whatever the client raises on bytes it cannot read: the record is refused
        return [UnreadableRecord(topic, partition, max(base, start), f"unreadable message set at offset {base}: {exc}")]


def _batch(topic: str, partition: int, data: bytes, pos: int, end: int, header: tuple, start: int) -> list:
    base, _, _, _, crc, attributes, _, first_ts, max_ts, _, _, _, count = header
    if crc32c(memoryview(data)[pos + CRC_FROM : end]) != crc:
        raise BatchFormatError("CRC-32C mismatch")
    if attributes & CONTROL:
        return []
    if attributes & COMPRESSION_MASK:
        try:
            return from_batch(topic, partition, data[pos:end], start)
        except Exception as exc:  # a codec not installed (kafka-python's UnsupportedCodecError), a bad payload
            raise BatchFormatError(f"compressed batch not decoded: {exc}") from exc
    stamp = max_ts if attributes & LOG_APPEND_TIME else None
    return _records(topic, partition, data, pos + HEADER.size, end, count, base, first_ts, stamp, start)


def _records(
    topic: str, partition: int, data: bytes, pos: int, end: int, count: int, base: int, first_ts: int,
    stamp: int | None, start: int,
) -> list[Record]:  # fmt: skip
    """Each record of an uncompressed batch: one loop, the one-byte varints (most lengths and deltas) inline."""
    out, new, vi = [], object.__new__, _varint
    for _ in range(count):
        length, pos = vi(data, pos)
        record_end = pos + length
        ts_delta, pos = vi(data, pos + 1)  # after the record's attributes (unused)
        offset_delta, pos = vi(data, pos)
        key_len, pos = vi(data, pos)
        key = None if key_len < 0 else data[pos : pos + key_len]
        pos += max(key_len, 0)
        value_len, pos = vi(data, pos)
        value = None if value_len < 0 else data[pos : pos + value_len]
        pos += max(value_len, 0)
        n_headers, pos = vi(data, pos)
        headers = _headers(data, pos, n_headers) if n_headers else ()
        if pos > record_end or record_end > end:
            raise BatchFormatError(f"record at offset {base + offset_delta} overruns its length")
        pos = record_end
        if base + offset_delta < start:
            continue
        ts = first_ts + ts_delta if stamp is None else stamp
        record = new(Record)
        record.__dict__.update(
            topic=topic, partition=partition, offset=base + offset_delta, timestamp_ms=ts if ts >= 0 else None,
            key=key, value=value, headers=headers,
        )  # fmt: skip
        out.append(record)
    if pos != end:
        raise BatchFormatError(f"{end - pos} bytes after the last of {count} records")
    return out


def _headers(data: bytes, pos: int, count: int) -> tuple[tuple[str, bytes | None], ...]:
    out = []
    for _ in range(count):
        key_len, pos = _varint(data, pos)
        key = data[pos : pos + key_len].decode()  # not UTF-8: UnicodeDecodeError, a ValueError
        pos += key_len
        value_len, pos = _varint(data, pos)
        out.append((key, None if value_len < 0 else data[pos : pos + value_len]))
        pos += max(value_len, 0)
    return tuple(out)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint at ``pos``: its value and the position after it."""
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    result, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = data[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return (result >> 1) ^ -(result & 1), pos + 1
        shift += 7
        if shift > 63:
            raise BatchFormatError("varint longer than 10 bytes")
