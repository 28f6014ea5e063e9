"""Records as any client could write them, for tests of what the tap does with them: null header values (librdkafka
and franz-go send them; kafka-python's ``send`` refuses them) and header names that are not UTF-8 (the Java client
sends any bytes). kafka-python's own encoder builds the record batch and its protocol classes the Produce request;
no protocol bytes are written here."""

from __future__ import annotations

import time


class NotUtf8(str):
    """A header name that kafka-python's encoder writes as bytes that are not UTF-8."""

    def encode(self, *args, **kwargs) -> bytes:
        return b"\xff\xfe"


def produce_raw(
    bootstrap: str, topic: str, key: bytes | None, value: bytes | None, headers: list, partition: int = 0
) -> int:
    """One record on ``partition`` of ``topic``, exactly as given (a None header value written as null); raises
    unless the broker took it. Returns its offset."""
    return produce_batch(bootstrap, topic, [(key, value, headers)], partition)


def produce_batch(bootstrap: str, topic: str, records: list[tuple], partition: int = 0) -> int:
    """``(key, value, headers)`` records in one record batch, as :func:`produce_raw` writes one; the first's
    offset."""
    from kafka.errors import for_code
    from kafka.net.compat import KafkaNetClient
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder

    batch = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 30)
    for i, (key, value, headers) in enumerate(records):
        batch.append(i, int(time.time() * 1000), key, value, headers)
    topic_data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        acks=-1,
        timeout_ms=30_000,
        topic_data=[
            topic_data(
                name=topic,
                partition_data=[topic_data.PartitionProduceData(index=partition, records=bytes(batch.build()))],
            )
        ],
        min_version=3,
        max_version=9,
    )
    client = KafkaNetClient(bootstrap_servers=[bootstrap], request_timeout_ms=30_000)
    try:
        client.check_version(timeout_ms=30_000)
        node = client.least_loaded_node()
        assert client.await_ready(node, timeout_ms=30_000), f"no connection to {bootstrap}"
        response = client.send_and_receive(node, request, timeout_ms=60_000)
    finally:
        client.close()
    (answer,) = response.to_dict()["responses"] if "responses" in response.to_dict() else response.to_dict()["topics"]
    (part,) = answer.get("partition_responses") or answer.get("partitions")
    if part["error_code"]:
        raise for_code(part["error_code"])(f"the broker refused the record: {part}")
    return part["base_offset"]
