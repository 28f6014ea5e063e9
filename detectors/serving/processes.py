"""Local server processes (tritonserver here, the Kafka broker in the gateway): free ports, and stopping a
server with everything it started. Each server runs in its own session, so its process group is its tree."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable

PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent thread ends (linux/prctl.h)


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
    # a reaped leader's number stays the group's while a member lives; a live process under it now is another's
    # (the number was reused, the group is gone), and a second stop must not kill it
    if process.returncode is None or not _alive(process.pid):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def kill_group(process: subprocess.Popen) -> None:
    """SIGKILL the process group led by ``process`` at once (the crash case) and reap the leader; a leader reaped
    before is left alone (its number may be another's now)."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _alive(pid: int) -> bool:
    """Whether a process (a zombie included) holds ``pid`` now."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` for a server this process starts: on Linux the kernel sends the server SIGTERM when the
    thread that started it ends, so a parent killed outright (SIGKILL, the OOM killer) leaves no server behind
    (each runs in its own session: no terminal's hangup or group signal reaches it). None elsewhere than Linux,
    and off the main thread (that thread's end would stop the server; ``preexec_fn`` is unsafe beside threads)."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child, between fork and exec, only calls
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    parent = os.getpid()

    def guard() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)  # (kept across exec for a binary that is not set-uid)
        if os.getppid() != parent:  # the parent died before the call took effect
            os._exit(1)

    return guard
