"""Local server processes (tritonserver here, the Kafka broker in the gateway): free ports, and stopping a
server with everything it started. Each server runs in its own session, so its process group is its tree."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess


def free_port() -> int:
    """A TCP port on loopback that nothing listens on now (for local servers and tests)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(process: subprocess.Popen, timeout_s: float = 30.0) -> None:
    """SIGTERM the process group led by ``process`` (started with ``start_new_session=True``), wait for the
    leader, then SIGKILL whatever of the group is left (a server's children, such as Triton's python stubs)."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
