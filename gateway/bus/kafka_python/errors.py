"""kafka-python's exceptions as the project's: :func:`mapped` around every call into kafka-python. The classes the
project acts on are named (a subclass of one maps as it does); the rest are what the exception says of itself:
:class:`BrokerUnavailable` when ``retriable``, else a plain :class:`BusError`."""

from __future__ import annotations

from contextlib import AbstractContextManager

from gateway.bus import errors as bus

ACTED_ON: dict[str, type[bus.BusError]] = {
    name: kind
    for kind, names in (
        (bus.CommitFailed, "CommitFailedError RebalanceInProgressError IllegalGenerationError UnknownMemberIdError"),
        (bus.RecordTooLarge, "MessageSizeTooLargeError RecordListTooLargeError"),
        (bus.UnknownTopic, "UnknownTopicOrPartitionError"),
        (bus.CorruptBatch, "CorruptRecordError"),
        (bus.NoAnswer, "KafkaTimeoutError RequestTimedOutError"),
        (bus.BrokerUnavailable, "KafkaConnectionError NodeNotReadyError"),
        (bus.AccessDenied, "AuthorizationError SaslAuthenticationFailedError UnsupportedSaslMechanismError"),
    )
    for name in names.split()
}


def to_bus_error(exc: BaseException) -> bus.BusError | None:
    """The project's error for a client exception (its message names the client's class), or None for what is not
    the client's (a bug)."""
    from kafka.errors import KafkaError

    if not isinstance(exc, KafkaError):
        return None
    kinds = [ACTED_ON[c.__name__] for c in type(exc).__mro__ if c.__name__ in ACTED_ON]
    kind = kinds[0] if kinds else bus.BrokerUnavailable if getattr(exc, "retriable", False) else bus.BusError
    return bus.named(kind, type(exc).__name__, str(exc))


def mapped() -> AbstractContextManager[None]:
    """Run a call into kafka-python; its exceptions come out as :class:`~gateway.bus.errors.BusError` subclasses."""
    return bus.translating(to_bus_error)
