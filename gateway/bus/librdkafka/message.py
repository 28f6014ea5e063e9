r"""What librdkafka's messages become: :class:`MessageRecord`\ s (records whose fields are read from the message
when asked) or views (the messages themselves). An error among them goes to the consumer; a record whose header
name is not UTF-8 becomes an :class:`~gateway.bus.records.UnreadableRecord`."""

from __future__ import annotations

import gc
import operator
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from gateway.bus.records import Fetched, Polled, Record, UnreadableRecord, timestamp_ms

# the consumer's, for a message that carries an error (confluent's KafkaError)
OnError = Callable[[object], None]
# confluent-kafka's Message.headers() returns a NULL name with an exception set for a header name that is not UTF-8,
# which a specialised Python call (3.11+) does not check; called from C, it raises SystemError, every time
HEADERS = operator.methodcaller("headers")
MESSAGE_ERROR = operator.methodcaller("error")


class MessageRecord(Record):
    """A record whose fields are its message's, read when asked; its headers read already, to check them."""

    __slots__ = ("_headers", "_m")

    def __init__(self, message: object, headers: list | None) -> None:
        self._m, self._headers = message, headers

    topic = property(lambda self: self._m.topic())
    partition = property(lambda self: self._m.partition())
    offset = property(lambda self: self._m.offset())
    timestamp_ms = property(lambda self: timestamp_ms(self._m.timestamp()))
    key = property(lambda self: self._m.key())
    value = property(lambda self: self._m.value())
    headers = property(lambda self: tuple(self._headers) if self._headers else ())


@contextmanager
def collector_paused() -> Iterator[None]:
    """The garbage collector paused while a poll's batch is built (its passes took half the CPU: CHANGELOG.md). A
    record refers to its message only, never back, so none is garbage a pass could find."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def records(messages: list, on_error: OnError) -> list[Fetched]:
    """A record per message (an :class:`UnreadableRecord` for one whose header name is not UTF-8)."""
    out: list[Fetched] = []
    add = out.append
    with collector_paused():
        for m in messages:
            if m.error() is not None:
                on_error(m.error())
                continue
            # most records have none: asked the fast way first, then checked below
            if m.headers() is None:
                add(MessageRecord(m, None))
                continue
            # a header name that is not UTF-8: confluent-kafka cannot make it a str
            try:
                headers = HEADERS(m)
            except Exception as exc:
                utf8 = isinstance(exc, SystemError | UnicodeDecodeError)
                why = "a header name is not UTF-8" if utf8 else f"{type(exc).__name__}: {exc}"
                reason = f"unreadable record at offset {m.offset()} of {m.topic()}/{m.partition()}: {why}"
                add(UnreadableRecord(m.topic(), m.partition(), m.offset(), reason))
                continue
            add(MessageRecord(m, headers))
    return out


def views(messages: list, on_error: OnError) -> Polled:
    """The messages themselves as views (nothing is made per record), an error among them passed to ``on_error``
    and left out. Headers are not read, so a header name that is not UTF-8 does not matter here."""
    # errors are rare: looked for in one pass in C, then filtered
    if any(map(MESSAGE_ERROR, messages)):
        kept = []
        for m in messages:
            if m.error() is None:
                kept.append(m)
            else:
                on_error(m.error())
        messages = kept
    return Polled(messages, [])
