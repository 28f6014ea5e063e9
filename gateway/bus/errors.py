"""The project's errors for whatever a Kafka client raises: every call into a client runs inside its engine's
``mapped()`` (:func:`translating`), which raises the client's exception again as one of these, chained, its words
kept. Each engine names the errors the project acts on and leaves the rest to the client's own judgement."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


class BusError(RuntimeError):
    """The broker or the Kafka client failed; every error the bus raises is one."""


class BrokerUnavailable(BusError):
    """No broker answered in time (not started, frozen, unreachable, a leader moving): never a verdict on a record."""


class NoAnswer(BrokerUnavailable):
    """A request went unanswered in time (a frozen or overloaded broker), rather than refused or cut."""


class CommitFailed(BusError):
    """The group rebalanced before offsets were committed: the partitions' next owner redelivers what was not."""


class RecordTooLarge(BusError):
    """A record larger than the producer (``max_message_bytes``) or the broker accepts."""


class UnknownTopic(BusError):
    """A topic or partition the broker does not know."""


class CorruptBatch(BusError):
    """A fetched batch the client cannot decode as a whole (a failed CRC): nothing can be skipped past it."""


class AccessDenied(BusError):
    """The broker refused this client's credentials, certificate or permissions: retrying will not help."""


class ClientConfigError(BusError):
    """The client refused a setting (a property it does not know, a value out of range): the command line exits 2."""


@contextmanager
def translating(translate: Callable[[BaseException], BusError | None]) -> Iterator[None]:
    """Run a call into a client; an exception ``translate`` knows comes out as its :class:`BusError`, chained."""
    try:
        yield
    except BusError:
        raise
    except Exception as exc:
        ours = translate(exc)
        if ours is None:
            raise
        raise ours from exc


def named(kind: type[BusError], name: str, text: str) -> BusError:
    """``kind`` with a message that starts with the client's name for the error (once)."""
    return kind(text if text.startswith(name) else f"{name}: {text}" if text else name)
