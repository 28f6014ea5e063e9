"""``lastmile bench bus``: the bus's two engines side by side on one local broker (Tansu), in one run.

Each engine writes the same records (score events as the gateways write them, keyed, spread over the partitions)
to a topic of its own, and each reads the records librdkafka wrote, through the bus's reader as the monitor does
(``poll_views`` of up to 10,000 records, every value read and its length summed, in C so that the measuring loop
adds as little as it can to the reader's CPU; what the process held before left out of the garbage collector's passes
as the monitor does). Every job runs in a freshly spawned process
(:func:`gateway.ops.bench.measure.isolated`): its wall seconds, CPU seconds (all its threads: the client's own included)
and records per CPU-second. The broker's own CPU is not counted. Each engine also reads them as records (``poll``:
a :class:`~gateway.bus.Record` each, as the gateway and ``lastmile scores`` read)."""

from __future__ import annotations

import gc
import operator
import time
from typing import Any

from gateway.ops.bench.measure import isolated, measure
from gateway.toolkit import tansu

ENGINES = ("librdkafka", "kafka-python")
READ_BATCH = 10_000  # records a poll may hand out, as the monitor asks
VALUE = operator.methodcaller("value")  # a row's value (the reader's own loop costs as little as it can: in C)
VALUE_ATTRIBUTE = operator.attrgetter("value")  # a record's
TIMEOUT_S = 600.0


def _settings(bootstrap: str, engine: str, topic: str):
    from gateway.core.kafka_settings import KafkaSettings

    return KafkaSettings(
        bootstrap=bootstrap,
        client=engine,
        input_topic=topic,
        output_topic=topic,
        client_id=f"bench-{engine}",
        ack_timeout_s=TIMEOUT_S,
    )


def _records(count: int, partitions: int) -> list[tuple[int, bytes, bytes]]:
    """``count`` score events (about 590 bytes each), video i on partition i mod ``partitions``."""
    from gateway.core.messages import ScoreEvent, idempotency_key

    out = []
    for i in range(count):
        vid = f"bench-{i // 24}"
        event = ScoreEvent(
            video_id=vid,
            condition="full",
            detector="npr",
            detector_version="1",
            runtime="embedded",
            score=float(i % 97) / 10,
            decision=bool(i % 2),
            threshold=0.5,
            label="real",
            event_time=1.8e9,
            idempotency_key=idempotency_key(vid, "full", "npr", str(i)),
        )
        out.append((i % partitions, vid.encode(), event.model_dump_json().encode()))
    return out


def write_job(bootstrap: str, engine: str, topic: str, count: int, partitions: int) -> dict[str, Any]:
    """One engine writes ``count`` records (the records are made before the clock starts)."""
    from gateway import bus

    records = _records(count, partitions)
    producer = bus.producer(_settings(bootstrap, engine, topic))

    def write() -> None:
        for partition, key, value in records:
            producer.send(topic, value, key=key, partition=partition)
        producer.flush(TIMEOUT_S)

    took = measure(write)
    producer.close()
    return {**took, "records": count, "records_per_cpu_s": round(count / took["cpu_s"]) if took["cpu_s"] else None}


def read_job(
    bootstrap: str, engine: str, topic: str, count: int, partitions: int, api: str = "views", values: bool = True
) -> dict[str, Any]:
    """One engine reads ``count`` records of ``topic`` from its start: as views (``poll_views``, as the monitor reads)
    or as records (``poll``, as the gateway and ``lastmile scores`` read); ``values``: each record's value read and
    its length summed (else only the records handed out are counted: what the bus costs, with nothing of the
    reader's own)."""
    from gateway import bus

    reader = bus.reader(_settings(bootstrap, engine, topic))
    parts = [bus.Partition(topic, p) for p in range(partitions)]
    reader.assign(parts)
    reader.seek_to_beginning(*parts)
    got = {"records": 0, "bytes": 0}
    gc.freeze()  # as the monitor does (gateway/monitor/service.py): what the process holds is left out of collections

    def read() -> None:
        deadline = time.monotonic() + TIMEOUT_S
        while got["records"] < count:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{engine} read {got['records']} of {count} records in {TIMEOUT_S:.0f} s")
            if api == "views":
                read, value = reader.poll_views(500, READ_BATCH).views, VALUE
            else:
                read, value = reader.poll(500, READ_BATCH), VALUE_ATTRIBUTE
            got["records"] += len(read)
            if values:
                got["bytes"] += sum(map(len, filter(None, map(value, read))))  # every value read (a tombstone's: None)

    took = measure(read)
    reader.close()
    rate = round(got["records"] / took["cpu_s"]) if took["cpu_s"] else None
    return {**took, **got, "records_per_cpu_s": rate}


def bench_bus(records: int = 200_000, partitions: int = 4) -> dict[str, Any]:
    """Both engines' writes and reads of ``records`` records; the read rate ratio, librdkafka over kafka-python."""
    from gateway import bus

    with tansu.start_broker() as broker:
        topics = {engine: f"bench.bus.{engine}" for engine in ENGINES}
        for topic in topics.values():
            bus.ensure_topics(_settings(broker.bootstrap, "librdkafka", topic), partitions=partitions)
        writes = {e: isolated(write_job, broker.bootstrap, e, topics[e], records, partitions) for e in ENGINES}
        source = topics["librdkafka"]  # both read what librdkafka wrote
        reads = {e: isolated(read_job, broker.bootstrap, e, source, records, partitions) for e in ENGINES}
        as_records = {
            e: isolated(read_job, broker.bootstrap, e, source, records, partitions, "records") for e in ENGINES
        }
        handed_out = {
            e: isolated(read_job, broker.bootstrap, e, source, records, partitions, "views", False) for e in ENGINES
        }
    for engine in ENGINES:
        for read in (reads[engine], as_records[engine], handed_out[engine]):
            if read["records"] != records:
                raise RuntimeError(f"{engine} read {read['records']} records, not {records}")

    return {
        "records": records,
        "partitions": partitions,
        "value_bytes": round(reads["librdkafka"]["bytes"] / records),
        "write": writes,
        "read": reads,
        "read_ratio_librdkafka_over_kafka_python": _ratio(reads),
        "read_as_records": as_records,
        "read_handed_out": handed_out,
        "read_handed_out_ratio_librdkafka_over_kafka_python": _ratio(handed_out),
        "note": "each job in a fresh process; CPU seconds are that process's (the client's threads included), "
        "not the broker's; both engines read the records librdkafka wrote; 'read' as the monitor reads (poll_views), "
        "'read_as_records' as the gateway and lastmile scores read (poll: a Record each), each with every value read; "
        "'read_handed_out': poll_views with no value read, the bus's own cost (librdkafka's messages are its views)",
    }


def _ratio(jobs: dict[str, dict[str, Any]]) -> float | None:
    """librdkafka's records per CPU-second over kafka-python's, to 2 places."""
    fast, slow = (jobs[e]["records_per_cpu_s"] for e in ENGINES)
    return round(fast / slow, 2) if fast and slow else None
