"""Topics, committed offsets and whether a broker answers, on the settings' engine. A broker that does not answer
is one line naming the bootstrap and what to check, within :data:`PING_TIMEOUT_S`."""

from __future__ import annotations

from gateway.bus.engines import admin
from gateway.bus.errors import AccessDenied, BrokerUnavailable, BusError, ClientConfigError
from gateway.core.kafka_settings import KafkaSettings

# a command that talks to Kafka says within this that no broker answers (one line; its start-up, a few seconds on
# a loaded machine, comes first: the line is due within 10 s of the command)
PING_TIMEOUT_S = 6.0
ADMIN_TIMEOUT_S = 10.0


class NoBroker(BrokerUnavailable):
    """No broker answered at the bootstrap: said once, with what to check."""


def ping(settings: KafkaSettings, timeout_s: float = PING_TIMEOUT_S) -> None:
    """Return once a broker of ``settings.bootstrap`` answers; raises :class:`NoBroker` if none does in time, and
    :class:`AccessDenied`, naming the settings to check, where one answered but refused this client."""
    try:
        admin(settings).ping(settings, timeout_s)
    except AccessDenied as exc:
        raise AccessDenied(
            f"a broker at {settings.bootstrap} answered but refused this client: check kafka.security_protocol, "
            f"kafka.sasl_mechanism, kafka.sasl_username and its password, or the TLS settings ({exc})"
        ) from exc
    except BusError as exc:
        if not isinstance(exc, BrokerUnavailable):
            raise
        raise NoBroker(
            f"no broker answered at {settings.bootstrap} within {timeout_s:.0f} s ({exc}); check kafka.bootstrap "
            "(--bootstrap), or start a local broker with `lastmile up` or `lastmile kafka up`"
        ) from exc


def ensure_topics(settings: KafkaSettings, partitions: int = 4, extra: tuple[str, ...] = ()) -> list[str]:
    """Create the input, output and DLQ topics (and ``extra``, e.g. the labels topic) if missing; their names."""
    names = list(dict.fromkeys([settings.input_topic, settings.output_topic, settings.dlq, *(n for n in extra if n)]))
    engine = admin(settings)
    existing = engine.topics(settings, ADMIN_TIMEOUT_S)
    missing = [n for n in names if n not in existing]
    if missing:
        engine.create_topics(settings, missing, partitions, ADMIN_TIMEOUT_S)
    return names


def committed_offsets(settings: KafkaSettings, group: str, topic: str) -> dict[int, int]:
    """Per partition of ``topic``, the offset ``group`` committed (partitions it never committed are absent)."""
    return admin(settings).committed_offsets(settings, group, topic, ADMIN_TIMEOUT_S)


def check_record_limits(settings: KafkaSettings, topics: list[str]) -> KafkaSettings:
    """Refuse to start, in one line (:class:`ClientConfigError`), where a topic admits records larger than
    ``kafka.max_message_bytes``: no fetch of ours could hold one. A topic that states no ``max.message.bytes``
    (Tansu's, unless made with one) or does not exist yet is taken as it comes. Returns the settings for a consumer
    of ``topics``: its fetch sized to the largest limit they state where every one states one (a client fetches,
    and prefetches, that much)."""
    limits = admin(settings).record_limits(settings, topics, ADMIN_TIMEOUT_S)
    for topic, limit in sorted(limits.items()):
        if limit > settings.max_message_bytes:
            raise ClientConfigError(
                f"topic {topic} admits records of up to {limit} bytes (its max.message.bytes), over "
                f"kafka.max_message_bytes ({settings.max_message_bytes}): raise kafka.max_message_bytes to {limit}, "
                "or lower the topic's max.message.bytes"
            )
    if limits and len(limits) == len(set(topics)):
        return settings.model_copy(update={"max_message_bytes": max(1024, *limits.values())})
    return settings
