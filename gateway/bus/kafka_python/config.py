"""kafka-python's clients, built from the project's settings (the same typed settings librdkafka takes)."""

from __future__ import annotations

from gateway.bus.errors import ClientConfigError
from gateway.bus.kafka_python.join import keep_finished_joins
from gateway.bus.librdkafka.config import fetch_limit
from gateway.core.kafka_settings import KafkaSettings


def options(settings: KafkaSettings) -> dict:
    opts: dict = {
        "bootstrap_servers": settings.bootstrap.split(","),
        "client_id": settings.client_id,
        "security_protocol": settings.security_protocol,
    }
    try:
        if settings.sasl_mechanism:
            opts.update(
                sasl_mechanism=settings.sasl_mechanism,
                sasl_plain_username=settings.sasl_username,
                sasl_plain_password=settings.secret("sasl_password"),
            )
        tls = {
            "ssl_cafile": settings.ssl_cafile,
            "ssl_certfile": settings.ssl_certfile,
            "ssl_keyfile": settings.ssl_keyfile,
            "ssl_password": settings.secret("ssl_key_password"),
        }
    except ValueError as exc:
        raise ClientConfigError(str(exc)) from None
    opts.update({k: v for k, v in tls.items() if v is not None})
    return opts


def admin_client(settings: KafkaSettings, timeout_ms: int = 5000):
    from kafka import KafkaAdminClient

    return KafkaAdminClient(**options(settings), request_timeout_ms=timeout_ms)


def producer_client(settings: KafkaSettings):
    """Every send acknowledged by all replicas; a broker that does not answer fails a send within
    ``request_timeout_ms`` (blocked ``max_block_ms`` at most)."""
    from kafka import KafkaProducer

    return KafkaProducer(
        **options(settings),
        acks="all",
        linger_ms=5,
        max_request_size=fetch_limit(settings),
        retries=5,
        request_timeout_ms=settings.request_timeout_ms,
        max_block_ms=settings.max_block_ms,
    )


def consumer_client(settings: KafkaSettings, group: bool = True):
    """A member of ``settings.group_id`` (manual commits, eager assignors) or a reader; from the earliest offset,
    committed records only; a response holds two fetches (as librdkafka's)."""
    from kafka import KafkaConsumer

    fetch = fetch_limit(settings)
    members = {
        "group_id": settings.group_id,
        "group_instance_id": settings.group_instance_id,
        "max_poll_interval_ms": settings.max_poll_interval_ms,
        "session_timeout_ms": settings.session_timeout_ms,
        "heartbeat_interval_ms": settings.heartbeat_interval_ms,
        "partition_assignment_strategy": eager_assignors(settings.assignment_strategy),
        "request_timeout_ms": max(settings.request_timeout_ms, settings.session_timeout_ms + 1000),
    }
    consumer = KafkaConsumer(
        **options(settings),
        **(members if group else {"group_id": None, "request_timeout_ms": settings.request_timeout_ms}),
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        max_poll_records=settings.max_poll_records,
        fetch_max_bytes=fetch,
        max_partition_fetch_bytes=fetch,
        receive_message_max_bytes=2 * fetch,
    )
    # a join finished between two polls is completed, not thrown away
    if group:
        keep_finished_joins(consumer)
    return consumer


def eager_assignors(strategy: str | None = None) -> tuple:
    """kafka-python's eager assignors (``strategy`` first), named so that no new default changes them: a member
    revokes every partition before each join, which :attr:`KpConsumer.joined` counts on."""
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

    if strategy == "roundrobin":
        return (RoundRobinPartitionAssignor, RangePartitionAssignor)
    return (RangePartitionAssignor, RoundRobinPartitionAssignor)
