"""SIGTERM, SIGINT and SIGHUP (a supervisor or Kubernetes, Ctrl-C, a closed terminal) for every long-running
command, handled one way: the first signal asks the command to stop, and a second one cannot interrupt its
clean-up. SIGHUP is left alone where it is ignored already (``nohup``)."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Protocol

from gateway.cli.logs import configure_logging

SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
Handler = Callable[[int, FrameType | None], None] | signal.Handlers


class Service(Protocol):
    """A long-lived service (the gateway, the monitor): it runs until its stop event is set."""

    stop_event: threading.Event

    def run(self) -> None: ...


@contextlib.contextmanager
def _handling(handler: Handler) -> Iterator[None]:
    """``handler`` for the signals while the block runs; the previous handlers afterwards."""
    mine = [s for s in SIGNALS if not (s == signal.SIGHUP and signal.getsignal(s) == signal.SIG_IGN)]  # nohup
    previous = {sig: signal.signal(sig, handler) for sig in mine}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def stop_on_signal() -> Iterator[threading.Event]:
    """An event that any of the signals sets, for the block to check as it works."""
    stop = threading.Event()
    with _handling(lambda *_: stop.set()):
        yield stop


def shielded(cleanup: Callable[[], None]) -> None:
    """Run ``cleanup`` with the signals ignored: a second Ctrl-C must not interrupt the clean-up."""
    with _handling(signal.SIG_IGN):
        cleanup()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # the only way to end a blocking wait(): Python retries it after a handler that returns


@contextlib.contextmanager
def interrupted_by_signal(say: Callable[[int], None]) -> Iterator[list[int]]:
    """The block ends by :class:`KeyboardInterrupt` on the first of the signals (SIGTERM and SIGHUP too, not only
    Ctrl-C), once ``say(signum)`` has said what to do next (a replay: how to resume); the signals after it are
    ignored, so that no second Ctrl-C interrupts the clean-up. Yields the signal received (empty: none)."""
    got: list[int] = []

    def first(signum: int, frame: FrameType | None) -> None:
        got.append(signum)
        for sig in SIGNALS:
            if signal.getsignal(sig) is first:
                signal.signal(sig, signal.SIG_IGN)
        say(signum)
        raise KeyboardInterrupt

    with _handling(first):
        yield got


def serve_until_signalled(process: subprocess.Popen, stop: Callable[[], None]) -> None:
    """Wait for a local server's process; a signal or the server's own exit ends the wait, and ``stop`` then
    stops it with everything it started and cleans up."""
    with _handling(_interrupt):
        try:
            with contextlib.suppress(KeyboardInterrupt):
                process.wait()
        finally:
            shielded(stop)


def serve(make: Callable[[], Service], log_level: str) -> None:
    """Run a long-lived service until a signal sets its stop event, logging at ``log_level``."""
    configure_logging(log_level)
    service = make()
    with _handling(lambda *_: service.stop_event.set()):
        service.run()
