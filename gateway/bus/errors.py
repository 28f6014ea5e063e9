"""The project's errors for whatever the Kafka client raises: the client's own exceptions never leave the bus.

As httpx maps httpcore's, every call into kafka-python runs inside :func:`mapped`, which raises the client's
exception again as one of these, chained (``raise ... from``), so the client's words stay in the traceback and
the message. Callers catch :class:`BusError` (or a subclass), never ``Exception`` and never a kafka-python class.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


class BusError(RuntimeError):
    """The broker or the Kafka client failed; every error the bus raises is one."""


class BrokerUnavailable(BusError):
    """No broker answered in time (not started, frozen, unreachable, a leader or coordinator moving): worth
    trying again later; never a verdict on a record."""


class CommitFailed(BusError):
    """The group rebalanced before offsets were committed: the partitions' next owner redelivers what was not."""


class RecordTooLarge(BusError):
    """A record larger than the producer (``max_request_size``) or the broker accepts."""


class UnknownTopic(BusError):
    """A topic or partition the broker does not know."""


class CorruptBatch(BusError):
    """A fetched batch the client cannot decode as a whole (a failed CRC, bytes after its last record): the record
    at the consumer's position need not be the bad one, so nothing can be skipped past it."""


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
        ((e.KafkaConnectionError, e.KafkaTimeoutError, e.NodeNotReadyError, e.RequestTimedOutError), BrokerUnavailable),
    )
    for classes, kind in table:
        if isinstance(exc, classes):
            return kind
    return BrokerUnavailable if getattr(exc, "retriable", False) else BusError


def to_bus_error(exc: BaseException) -> BusError | None:
    """The project's error for a client exception (its message names the client's class), or None."""
    kind = _kind(exc)
    if kind is None:
        return None
    name, text = type(exc).__name__, str(exc)
    return kind(text if text.startswith(name) else f"{name}: {text}" if text else name)


@contextmanager
def mapped() -> Iterator[None]:
    """Run a call into kafka-python; its exceptions come out as :class:`BusError` subclasses."""
    try:
        yield
    except BusError:
        raise
    except Exception as exc:
        mapped_exc = to_bus_error(exc)
        if mapped_exc is None:
            raise
        raise mapped_exc from exc
