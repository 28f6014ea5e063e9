"""SIGTERM and SIGINT (a supervisor, Kubernetes, Ctrl-C) for every long-running command, handled one way: the
first signal asks the command to stop, and a second one cannot interrupt its clean-up."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Protocol

from gateway.cli.logs import configure_logging

SIGNALS = (signal.SIGTERM, signal.SIGINT)
Handler = Callable[[int, FrameType | None], None] | signal.Handlers


class Service(Protocol):
    """A long-lived service (the gateway, the monitor) that handles the signals itself."""

    def install_signal_handlers(self) -> None: ...

    def run(self) -> None: ...


@contextlib.contextmanager
def _handling(handler: Handler) -> Iterator[None]:
    """``handler`` for both signals while the block runs; the previous handlers afterwards."""
    previous = {sig: signal.signal(sig, handler) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def stop_on_signal() -> Iterator[threading.Event]:
    """An event that either signal sets, for the block to check as it works."""
    stop = threading.Event()
    with _handling(lambda *_: stop.set()):
        yield stop


def shielded(cleanup: Callable[[], None]) -> None:
    """Run ``cleanup`` with both signals ignored: a second Ctrl-C must not interrupt the clean-up."""
    with _handling(signal.SIG_IGN):
        cleanup()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # the only way to end a blocking wait(): Python retries it after a handler that returns


def serve_until_signalled(process: subprocess.Popen, stop: Callable[[], None]) -> None:
    """Wait for a local server's process; either signal or the server's own exit ends the wait, and ``stop`` then
    stops it with everything it started and cleans up."""
    with _handling(_interrupt):
        try:
            with contextlib.suppress(KeyboardInterrupt):
                process.wait()
        finally:
            shielded(stop)


def serve(make: Callable[[], Service], log_level: str) -> None:
    """Run a long-lived service until either signal (the service installs its own handlers), logging at
    ``log_level``."""
    configure_logging(log_level)
    service = make()
    service.install_signal_handlers()
    service.run()
