"""Topics, record limits and whether a broker answers, asked with librdkafka's ``AdminClient`` whichever engine
reads and writes the records. A broker that does not answer is one line naming the bootstrap and what to check."""

from __future__ import annotations

import time

from gateway.bus.errors import AccessDenied, BrokerUnavailable, BusError, ClientConfigError, NoAnswer, UnknownTopic
from gateway.bus.librdkafka import config
from gateway.bus.librdkafka.errors import from_error, kind_of, mapped
from gateway.core.kafka_settings import KafkaSettings

# a command says within this that no broker answers (after its start-up: the line is due within 10 s of it)
PING_TIMEOUT_S = 6.0
ADMIN_TIMEOUT_S = 10.0
# a ping asks this long at a time, so that a refusal is said at once, not at the ping's end
ATTEMPT_S = 0.5


class NoBroker(BrokerUnavailable):
    """No broker answered at the bootstrap: said once, with what to check."""


def ping(settings: KafkaSettings, timeout_s: float = PING_TIMEOUT_S) -> None:
    """Return once a broker of ``settings.bootstrap`` answers a metadata request; raises :class:`NoBroker` if none
    does in time, and :class:`AccessDenied`, naming the settings to check, where one answered but refused this
    client (the request then fails as a transport failure; librdkafka's error callback says why, at once)."""
    refused: list = []
    deny = lambda error: refused.append(error) if kind_of(error) is AccessDenied else None  # noqa: E731
    client = config.admin_client(settings, error_cb=deny, log_level=0)
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            try:
                with mapped():
                    meta = client.list_topics(timeout=min(ATTEMPT_S, max(deadline - time.monotonic(), 0.01)))
                break
            except BrokerUnavailable:
                # serves the error callbacks queued meanwhile
                client.poll(0)
                if refused:
                    raise from_error(refused[0]) from None
                if time.monotonic() >= deadline:
                    raise
        if not meta.brokers:
            raise NoAnswer("no broker in the cluster's metadata")
    except AccessDenied as exc:
        raise AccessDenied(
            f"a broker at {settings.bootstrap} answered but refused this client: check kafka.security_protocol, "
            f"kafka.sasl_mechanism, kafka.sasl_username and its password, or the TLS settings ({exc})"
        ) from exc
    except BrokerUnavailable as exc:
        raise NoBroker(
            f"no broker answered at {settings.bootstrap} within {timeout_s:.0f} s ({exc}); check kafka.bootstrap "
            "(--bootstrap), or start a local broker with `lastmile up` or `lastmile kafka up`"
        ) from exc


def ensure_topics(settings: KafkaSettings, partitions: int = 4, extra: tuple[str, ...] = ()) -> list[str]:
    """Create the input, output and DLQ topics (and ``extra``, e.g. the labels topic) if missing; their names. One
    that another client made meanwhile is no error."""
    from confluent_kafka.admin import NewTopic

    names = list(dict.fromkeys([settings.input_topic, settings.output_topic, settings.dlq, *(n for n in extra if n)]))
    client = config.admin_client(settings)
    with mapped():
        existing = client.list_topics(timeout=ADMIN_TIMEOUT_S).topics
        missing = [NewTopic(n, num_partitions=partitions, replication_factor=1) for n in names if n not in existing]
        futures = client.create_topics(missing, request_timeout=ADMIN_TIMEOUT_S) if missing else {}
    for name, future in futures.items():
        try:
            with mapped():
                future.result(timeout=ADMIN_TIMEOUT_S)
        except BusError as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise type(exc)(f"creating topic {name}: {exc}") from exc
        except TimeoutError:
            raise NoAnswer(f"creating topic {name}: no answer within {ADMIN_TIMEOUT_S:.0f} s") from None
    return names


def check_record_limits(settings: KafkaSettings, topics: list[str]) -> KafkaSettings:
    """Refuse to start, in one line (:class:`ClientConfigError`), where a topic admits records larger than
    ``kafka.max_message_bytes``; a topic that states no ``max.message.bytes`` (Tansu's) is taken as it comes. The
    settings for a consumer of ``topics``: its fetch sized to the largest limit, where every one states one."""
    limits = record_limits(settings, topics)
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


def record_limits(settings: KafkaSettings, topics: list[str]) -> dict[str, int]:
    """Each topic's ``max.message.bytes``, where it states one."""
    from confluent_kafka.admin import ConfigResource

    client = config.admin_client(settings)
    with mapped():
        futures = client.describe_configs([ConfigResource("topic", t) for t in topics], request_timeout=ADMIN_TIMEOUT_S)
    out = {}
    for resource, future in futures.items():
        try:
            with mapped():
                found = future.result(timeout=ADMIN_TIMEOUT_S).get("max.message.bytes")
        except UnknownTopic:
            continue
        if found is not None and found.value is not None:
            out[resource.name] = int(found.value)
    return out
