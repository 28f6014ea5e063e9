"""kafka-python's exceptions as the project's: :func:`mapped` around every call into kafka-python."""

from __future__ import annotations

from contextlib import AbstractContextManager

from gateway.bus.errors import (
    AccessDenied,
    BrokerUnavailable,
    BusError,
    CommitFailed,
    CorruptBatch,
    NoAnswer,
    RecordTooLarge,
    UnknownTopic,
    named,
    translating,
)


def _kind(exc: BaseException) -> type[BusError] | None:
    """The project's class for one of the client's exceptions; None for what is not the client's (a bug)."""
    from kafka import errors as e

    if not isinstance(exc, e.KafkaError):
        return None
    table: tuple[tuple[tuple[type[BaseException], ...], type[BusError]], ...] = (
        (
            (e.CommitFailedError, e.RebalanceInProgressError, e.IllegalGenerationError, e.UnknownMemberIdError),
            CommitFailed,
        ),
        ((e.MessageSizeTooLargeError, e.RecordListTooLargeError), RecordTooLarge),
        ((e.UnknownTopicOrPartitionError,), UnknownTopic),
        ((e.CorruptRecordError,), CorruptBatch),
        ((e.KafkaTimeoutError, e.RequestTimedOutError), NoAnswer),
        ((e.KafkaConnectionError, e.NodeNotReadyError), BrokerUnavailable),
        ((e.AuthorizationError, e.SaslAuthenticationFailedError, e.UnsupportedSaslMechanismError), AccessDenied),
    )
    for classes, kind in table:
        if isinstance(exc, classes):
            return kind
    return BrokerUnavailable if getattr(exc, "retriable", False) else BusError


def to_bus_error(exc: BaseException) -> BusError | None:
    """The project's error for a client exception (its message names the client's class), or None."""
    kind = _kind(exc)
    return None if kind is None else named(kind, type(exc).__name__, str(exc))


def mapped() -> AbstractContextManager[None]:
    """Run a call into kafka-python; its exceptions come out as :class:`BusError` subclasses."""
    return translating(to_bus_error)
