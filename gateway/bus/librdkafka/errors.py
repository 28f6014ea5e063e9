"""librdkafka's errors as the project's: :func:`mapped` around every call into confluent-kafka, :func:`from_error`
for a ``KafkaError`` handed back. Only the codes the project acts on are named; the rest are what ``KafkaError``
says of itself: :class:`BrokerUnavailable` when ``retriable()``, else a plain :class:`BusError`."""

from __future__ import annotations

from contextlib import AbstractContextManager

from gateway.bus import errors as bus

ACTED_ON: dict[str, type[bus.BusError]] = {
    name: kind
    for kind, names in (
        (bus.NoAnswer, "_TIMED_OUT _TIMED_OUT_QUEUE _MSG_TIMED_OUT REQUEST_TIMED_OUT"),
        (
            bus.BrokerUnavailable,
            "_TRANSPORT _ALL_BROKERS_DOWN _RESOLVE _QUEUE_FULL _WAIT_COORD COORDINATOR_NOT_AVAILABLE",
        ),
        (bus.CommitFailed, "REBALANCE_IN_PROGRESS ILLEGAL_GENERATION UNKNOWN_MEMBER_ID FENCED_INSTANCE_ID"),
        (
            bus.CommitFailed,
            "_ASSIGNMENT_LOST _MAX_POLL_EXCEEDED _NO_OFFSET _STATE STALE_MEMBER_EPOCH FENCED_MEMBER_EPOCH",
        ),
        (bus.RecordTooLarge, "MSG_SIZE_TOO_LARGE RECORD_LIST_TOO_LARGE INVALID_MSG_SIZE"),
        (bus.UnknownTopic, "UNKNOWN_TOPIC_OR_PART _UNKNOWN_TOPIC _UNKNOWN_PARTITION"),
        (bus.CorruptBatch, "_BAD_COMPRESSION _BAD_MSG INVALID_MSG INVALID_RECORD UNSUPPORTED_COMPRESSION_TYPE"),
        (
            bus.AccessDenied,
            "_SSL _AUTHENTICATION SASL_AUTHENTICATION_FAILED UNSUPPORTED_SASL_MECHANISM ILLEGAL_SASL_STATE",
        ),
        (bus.AccessDenied, "TOPIC_AUTHORIZATION_FAILED GROUP_AUTHORIZATION_FAILED CLUSTER_AUTHORIZATION_FAILED"),
        (
            bus.ClientConfigError,
            "_INVALID_ARG _INVALID_TYPE _NOT_CONFIGURED _UNKNOWN_PROTOCOL _UNSUPPORTED_FEATURE _FS",
        ),
    )
    for name in names.split()
}


def kind_of(error: object) -> type[bus.BusError]:
    """The project's class for a ``confluent_kafka.KafkaError``."""
    return ACTED_ON.get(error.name()) or (bus.BrokerUnavailable if error.retriable() else bus.BusError)


def from_error(error: object) -> bus.BusError:
    return bus.named(kind_of(error), error.name(), error.str())


def to_bus_error(exc: BaseException) -> bus.BusError | None:
    """The project's error for what confluent-kafka raised (``BufferError``: a full queue), or None."""
    from confluent_kafka import KafkaError, KafkaException

    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return from_error(exc.args[0])
    if isinstance(exc, KafkaException):
        return bus.BusError(f"KafkaException: {exc}")
    if isinstance(exc, BufferError):
        return bus.BrokerUnavailable(f"the producer's queue is full: {exc}")
    return None


def mapped() -> AbstractContextManager[None]:
    """Run a call into confluent-kafka; its exceptions come out as :class:`~gateway.bus.errors.BusError` subclasses."""
    return bus.translating(to_bus_error)
