"""``poll`` on kafka-python's consumer with the two workarounds that reach into its fetcher's private fields,
pinned by tests/test_bus_kafka_python.py (the fields still exist; the bare client still has the bug) and
tests/test_bus_contract.py (the behaviour, on both engines).

- **A resumed partition's records lost** (kafka-python 3.0): ``Fetcher.fetched_records`` in
  ``kafka/consumer/fetcher.py`` moves a resumed partition's parked records back only ``if
  self._next_partition_records is None``, but ``PartitionRecords.drain`` leaves a drained object there, so a
  partition paused mid-batch and resumed was never read again. Clearing a drained slot brings them back.
- **An undecodable record** (a header name that is not UTF-8): ``DefaultRecordBatch.__next__`` in
  ``kafka/record/default_records.py`` raises ``CorruptRecordError`` for it out of every ``poll`` at the same
  position. The bus seeks one past it and hands back an :class:`UnreadableRecord` in its place.
"""

from __future__ import annotations

from gateway.bus.kafka_python.errors import mapped
from gateway.bus.records import Record, UnreadableRecord

FETCHER = "_fetcher"
# the in-line slot: records of one partition being handed out
NEXT_RECORDS = "_next_partition_records"
# partition -> records fetched before it was paused
PARKED_RECORDS = "_paused_partition_records"


def poll_client(consumer, timeout_ms: int, max_records: int | None = None) -> dict:
    """``consumer.poll`` as ``{kafka TopicPartition: [Record | UnreadableRecord, ...]}``, both workarounds
    applied; the client's errors come out as :class:`~gateway.bus.errors.BusError`."""
    restore_resumed(consumer)
    from kafka.errors import CorruptRecordError

    with mapped():
        try:
            got = consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
        except CorruptRecordError as exc:
            return _skip_unreadable(consumer, exc)
    return {tp: [from_client(m) for m in messages] for tp, messages in got.items()}


def restore_resumed(consumer) -> bool:
    """Clear a drained in-line slot while records of a resumed partition are parked; True if it did."""
    fetcher = getattr(consumer, FETCHER, None)
    current = getattr(fetcher, NEXT_RECORDS, None)
    parked = getattr(fetcher, PARKED_RECORDS, None)
    if current is None or current or not parked:
        return False
    paused = set(consumer.paused())
    if all(tp in paused for tp in parked):
        return False
    setattr(fetcher, NEXT_RECORDS, None)
    return True


def _skip_unreadable(consumer, exc: Exception) -> dict[object, list[Record | UnreadableRecord]]:
    """The partition whose next record kafka-python failed to decode: seek past that record and hand back an
    :class:`UnreadableRecord` in its place. Only a record's own structure (kafka-python's ValueError or IndexError
    while reading it); anything else about a batch (a failed CRC, bytes after its last record) is raised, as
    :class:`~gateway.bus.errors.CorruptBatch`, since the record at the position need not be the bad one."""
    broken = getattr(getattr(consumer, FETCHER, None), NEXT_RECORDS, None)
    tp = getattr(broken, "topic_partition", None)
    if tp is None or not isinstance(exc.__context__, ValueError | IndexError):
        raise exc
    offset = consumer.position(tp)
    consumer.seek(tp, offset + 1)
    reason = f"unreadable record at offset {offset} of {tp.topic}/{tp.partition}: {exc}"
    return {tp: [UnreadableRecord(tp.topic, tp.partition, offset, reason)]}


def from_client(msg: object) -> Record:
    """A kafka-python ``ConsumerRecord`` (no deserializers: bytes as sent) as a :class:`Record`."""
    stamp = getattr(msg, "timestamp", None)
    headers = getattr(msg, "headers", None)
    key, value = msg.key, msg.value
    return Record(
        msg.topic,
        msg.partition,
        msg.offset,
        stamp if isinstance(stamp, int) and stamp >= 0 else None,
        None if key is None else bytes(key),
        None if value is None else bytes(value),
        tuple((str(k), None if v is None else bytes(v)) for k, v in headers) if headers else (),
    )
