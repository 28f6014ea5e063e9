"""librdkafka's configuration: the typed settings in librdkafka's vocabulary, then ``kafka.properties`` as given.
A property the bus owns (at-least-once depends on it) or a typed setting names is refused with the setting to use;
librdkafka refuses what it does not know when the client is made (:class:`~gateway.bus.ClientConfigError`)."""

from __future__ import annotations

import logging
from typing import Any

from gateway.bus.errors import ClientConfigError
from gateway.bus.librdkafka.errors import mapped
from gateway.core.kafka_settings import KafkaSettings

# a fetch or request holds a record of max_message_bytes plus its framing
HEADROOM_BYTES = 1024 * 1024
# librdkafka wants receive.message.max.bytes >= fetch.max.bytes + 512
RESPONSE_OVERHEAD_BYTES = 512
# a group member commits its stored offsets this often (and when partitions go)
AUTO_COMMIT_MS = 1000
# the logger of its lines, served by each client's poll
LOGGER = "librdkafka"
# a broker holds a fetch with nothing new this long, and a request behind it on the same connection as long
FETCH_WAIT_MS = 100

# the bus's own properties (what its guarantees rest on) or a typed setting's: the setting to use instead
OWNED = {
    name: setting
    for setting, names in (
        ("kafka.bootstrap", "bootstrap.servers"),
        ("kafka.client_id", "client.id"),
        ("kafka.group_id", "group.id"),
        ("kafka.group_instance_id", "group.instance.id"),
        ("kafka.security_protocol", "security.protocol"),
        ("kafka.sasl_mechanism", "sasl.mechanism sasl.mechanisms"),
        ("kafka.sasl_username", "sasl.username"),
        ("kafka.sasl_password or kafka.sasl_password_file", "sasl.password"),
        ("kafka.ssl_cafile", "ssl.ca.location"),
        ("kafka.ssl_certfile", "ssl.certificate.location"),
        ("kafka.ssl_keyfile", "ssl.key.location"),
        ("kafka.ssl_key_password or kafka.ssl_key_password_file", "ssl.key.password"),
        ("kafka.assignment_strategy", "partition.assignment.strategy"),
        ("kafka.session_timeout_ms", "session.timeout.ms"),
        ("kafka.heartbeat_interval_ms", "heartbeat.interval.ms"),
        ("kafka.max_poll_interval_ms", "max.poll.interval.ms"),
        ("kafka.statistics_interval_ms", "statistics.interval.ms"),
        ("kafka.max_message_bytes", "message.max.bytes fetch.max.bytes max.partition.fetch.bytes"),
        ("kafka.max_message_bytes", "receive.message.max.bytes"),
        ("nothing: the bus commits what has an acknowledged outcome", "enable.auto.commit"),
        ("nothing: the bus stores an offset once its record's outcome is acknowledged", "enable.auto.offset.store"),
        ("nothing: the bus reads committed records only", "isolation.level"),
        ("nothing: the bus's producer is idempotent", "enable.idempotence"),
        ("nothing: the bus waits for every in-sync replica", "acks"),
        ("nothing", "enable.partition.eof"),
    )
    for name in names.split()
}


def common(settings: KafkaSettings) -> dict[str, Any]:
    """What every client of the settings takes: the broker, security and logging."""
    conf: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap,
        "client.id": settings.client_id,
        "security.protocol": settings.security_protocol.lower(),
        "socket.timeout.ms": settings.request_timeout_ms,
        "logger": logging.getLogger(LOGGER),
        "log.connection.close": False,
    }
    try:
        if settings.sasl_mechanism:
            conf.update({"sasl.mechanism": settings.sasl_mechanism, "sasl.username": settings.sasl_username or ""})
            conf["sasl.password"] = settings.secret("sasl_password") or ""
        key_password = settings.secret("ssl_key_password")
    except ValueError as exc:
        raise ClientConfigError(str(exc)) from None
    tls = {
        "ssl.ca.location": settings.ssl_cafile,
        "ssl.certificate.location": settings.ssl_certfile,
        "ssl.key.location": settings.ssl_keyfile,
        "ssl.key.password": key_password,
    }
    conf.update({k: v for k, v in tls.items() if v is not None})
    for name in settings.properties:
        if name in OWNED:
            raise ClientConfigError(f"kafka.properties: {name!r} is not passed through; set {OWNED[name]}")
    return {**conf, **settings.properties}


def admin_client(settings: KafkaSettings, **properties: object):
    """An admin client of the settings, with ``properties`` (librdkafka's) beside them."""
    from confluent_kafka.admin import AdminClient

    with mapped():
        return AdminClient({**common(settings), **properties})


def fetch_limit(settings: KafkaSettings) -> int:
    """The most a fetch (or a request) takes, on either engine: a record of ``max_message_bytes`` and its framing."""
    return settings.max_message_bytes + HEADROOM_BYTES


def consumer(settings: KafkaSettings, group: bool) -> dict[str, Any]:
    """A group member (manual offset store, committed every second, when partitions go and at close) or a reader.
    The largest reply read holds two fetches: Tansu adds the next batch to a reply whatever its size. Records
    fetched ahead: one record's worth at most."""
    limit = fetch_limit(settings)
    conf = {
        **common(settings),
        "group.id": settings.group_id if group else f"{settings.client_id}-reader",
        "enable.auto.commit": group,
        "auto.commit.interval.ms": AUTO_COMMIT_MS,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "enable.partition.eof": False,
        "partition.assignment.strategy": settings.assignment_strategy or "cooperative-sticky",
        "session.timeout.ms": settings.session_timeout_ms,
        "heartbeat.interval.ms": settings.heartbeat_interval_ms,
        "max.poll.interval.ms": settings.max_poll_interval_ms,
        "fetch.wait.max.ms": FETCH_WAIT_MS,
        "fetch.max.bytes": limit,
        "max.partition.fetch.bytes": limit,
        "receive.message.max.bytes": 2 * limit + RESPONSE_OVERHEAD_BYTES,
        "queued.max.messages.kbytes": max(1, limit // 1024),
        "statistics.interval.ms": settings.statistics_interval_ms,
    }
    if group and settings.group_instance_id:
        conf["group.instance.id"] = settings.group_instance_id
    return {**conf, **settings.properties}


def producer(settings: KafkaSettings) -> dict[str, Any]:
    """Idempotent, every send acknowledged by all in-sync replicas; one not acknowledged within ``ack_timeout_s``
    fails (never delivered later behind the caller's back)."""
    conf = {
        **common(settings),
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "message.max.bytes": fetch_limit(settings),
        "message.timeout.ms": int(settings.ack_timeout_s * 1000),
        "request.timeout.ms": min(settings.request_timeout_ms, int(settings.ack_timeout_s * 1000)),
    }
    return {**conf, **settings.properties}
