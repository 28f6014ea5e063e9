"""A pool of worker processes that knows which process runs which job, so a dead or overrunning worker costs
only its own job.

Each worker is a spawned process with a pipe to the parent and one job at a time. The parent's
:meth:`WorkerPool.poll` waits on the pipes and on the processes' sentinels together, and enforces the limits:
a worker whose resident memory passes ``memory_mb`` is killed with SIGKILL (what the kernel's OOM killer
does), and so is one still on its job after ``timeout_s``. A dead worker is replaced at once; its job comes
back as :class:`WorkerCrashed` or :class:`VideoTimeout`, and no other job is touched. A worker that fails to
start (its initializer raised) is replaced after a capped backoff, and the reason is kept in
:attr:`WorkerPool.start_error`.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import signal
import sys
import time
import traceback
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait

from detectors.serving.processes import PR_SET_PDEATHSIG
from transforms.support.backoff import Backoff

PAGE = os.sysconf("SC_PAGE_SIZE")
RESTART_BACKOFF = Backoff(0.5, 30.0)  # between starts of a worker, while workers fail to start


class WorkerFailure(Exception):
    """A job's worker process ended without an answer."""


class WorkerCrashed(WorkerFailure):
    """The worker died while on this job (killed by the kernel, a signal, or its memory cap)."""


class VideoTimeout(WorkerFailure):
    """The worker was still on this job after the per-video deadline and was killed."""


@dataclass
class Done:
    """A finished job: its result, or the error that ended it (an exception raised in the worker comes back as
    :class:`JobError`; a dead worker as :class:`WorkerFailure`)."""

    job_id: Hashable
    result: object = None
    error: Exception | None = None


class JobError(Exception):
    """The job raised in the worker (the worker lives on); the message holds the remote traceback."""


@dataclass
class _Worker:
    process: mp.process.BaseProcess
    conn: Connection
    job: Hashable | None = None
    started: float = 0.0
    ready: bool = False
    killed_for: WorkerFailure | None = None


@dataclass
class WorkerPool:
    size: int
    target: Callable[[object], object]
    initializer: Callable[..., None]
    initargs: tuple = ()
    memory_mb: int | None = None
    timeout_s: float | None = None
    restart_backoff: Backoff = RESTART_BACKOFF
    workers: list[_Worker] = field(default_factory=list, init=False)
    queue: deque = field(default_factory=deque, init=False)
    start_error: str | None = field(default=None, init=False)
    crashes: int = field(default=0, init=False)
    _start_failures: int = field(default=0, init=False)
    _next_start: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._ctx = mp.get_context("spawn")
        for _ in range(self.size):
            self._spawn()

    # -- the parent's side ----------------------------------------------------------------------------------
    def submit(self, job_id: Hashable, payload: object) -> None:
        """Queue a job; it starts as soon as a worker is free."""
        self.queue.append((job_id, payload))
        self._dispatch()

    def poll(self, timeout_s: float = 0.1) -> list[Done]:
        """Finished jobs (results and failures) within ``timeout_s``; enforces the limits and replaces workers."""
        done: list[Done] = []
        self._enforce_limits()
        waitables = {w.conn: w for w in self.workers} | {w.process.sentinel: w for w in self.workers}
        for ready in wait(list(waitables), timeout=timeout_s):
            worker = waitables[ready]
            if worker not in self.workers:
                continue  # already handled through its other waitable
            if ready is worker.conn:
                self._receive(worker, done)
            else:
                self._bury(worker, done)
        self._refill()
        self._dispatch()
        return done

    @property
    def busy(self) -> dict[Hashable, int]:
        """Jobs running now, with the pid of the worker running each."""
        return {w.job: w.process.pid for w in self.workers if w.job is not None}

    @property
    def pending(self) -> int:
        return len(self.queue) + len(self.busy)

    @property
    def any_ready(self) -> bool:
        """Whether some worker has started (its initializer ran)."""
        return any(w.ready for w in self.workers)

    def cancel_queued(self) -> list[Hashable]:
        """Take back every job not yet handed to a worker; return their ids."""
        ids = [job_id for job_id, _ in self.queue]
        self.queue.clear()
        return ids

    def close(self, timeout_s: float = 10.0) -> None:
        """Ask every worker to exit, wait, and kill what is left."""
        for w in self.workers:
            with contextlib.suppress(OSError):
                w.conn.send(None)
        deadline = time.monotonic() + timeout_s
        for w in self.workers:
            w.process.join(max(0.0, deadline - time.monotonic()))
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
            w.conn.close()
        self.workers.clear()

    # -- internals ------------------------------------------------------------------------------------------
    def _spawn(self) -> None:
        parent, child = self._ctx.Pipe()
        process = self._ctx.Process(
            target=_worker_main, args=(child, self.target, self.initializer, self.initargs, os.getpid()), daemon=True
        )
        process.start()
        child.close()
        self.workers.append(_Worker(process, parent))

    def _receive(self, worker: _Worker, done: list[Done]) -> None:
        try:
            kind, value = worker.conn.recv()
        except (EOFError, OSError):
            return  # the worker died mid-message: its sentinel reports it
        if kind == "ready":
            worker.ready, self._start_failures, self.start_error = True, 0, None
        elif kind == "start_error":
            self.start_error = value
        else:
            job, worker.job = worker.job, None
            done.append(Done(job, value) if kind == "ok" else Done(job, error=JobError(value)))

    def _bury(self, worker: _Worker, done: list[Done]) -> None:
        worker.process.join()
        self.workers.remove(worker)
        worker.conn.close()
        if worker.job is not None:
            self.crashes += 1
            error = worker.killed_for or WorkerCrashed(f"worker {worker.process.pid} died ({_exit(worker)})")
            done.append(Done(worker.job, error=error))
        elif not worker.ready:  # died while starting: back off before the next one
            self._start_failures += 1
            self._next_start = time.monotonic() + self.restart_backoff.delay(self._start_failures)

    def _refill(self) -> None:
        while len(self.workers) < self.size and time.monotonic() >= self._next_start:
            self._spawn()

    def _dispatch(self) -> None:
        for w in self.workers:
            if not self.queue:
                return
            if w.job is None and w.ready and w.process.is_alive():  # never a job to a worker still starting
                job_id, payload = self.queue.popleft()
                try:
                    w.conn.send((job_id, payload))
                except OSError:
                    self.queue.appendleft((job_id, payload))
                    continue
                w.job, w.started, w.killed_for = job_id, time.monotonic(), None

    def _enforce_limits(self) -> None:
        now = time.monotonic()
        for w in self.workers:
            if w.job is None or w.killed_for is not None:
                continue
            if self.timeout_s is not None and now - w.started > self.timeout_s:
                self._kill(w, VideoTimeout(f"still running after {self.timeout_s:g} s"))
            elif self.memory_mb is not None and (rss := _rss_mb(w.process.pid)) > self.memory_mb:
                self._kill(w, WorkerCrashed(f"resident memory {rss:.0f} MB passed the cap of {self.memory_mb} MB"))

    @staticmethod
    def _kill(worker: _Worker, reason: WorkerFailure) -> None:
        worker.killed_for = reason
        # an unreaped worker's pid is still its own (a reaped one's may be another process's now)
        if worker.process.exitcode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker.process.pid, signal.SIGKILL)


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE / 2**20
    except (OSError, IndexError, ValueError):
        return 0.0


def _exit(worker: _Worker) -> str:
    code = worker.process.exitcode
    if code is not None and code < 0:
        return f"signal {signal.Signals(-code).name}"
    return f"exit code {code}"


def _worker_main(conn: Connection, target: Callable, initializer: Callable, initargs: tuple, parent: int) -> None:
    """A worker: initialise once, then run one job at a time until told to stop (``None``) or its parent is gone
    (then it ends quietly: nobody is left to answer)."""
    for sig in (signal.SIGINT, signal.SIGHUP):  # the parent decides when workers stop (a closed terminal signals all)
        signal.signal(sig, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with(parent)
    try:
        initializer(*initargs)
    except Exception:
        _answer(conn, ("start_error", traceback.format_exc(limit=5)))
        return
    if not _answer(conn, ("ready", None)):
        return
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        _job_id, payload = message
        try:
            answer = ("ok", target(payload))
        except Exception:
            answer = ("error", traceback.format_exc(limit=8))
        if not _answer(conn, answer):
            return


def _answer(conn: Connection, answer: tuple) -> bool:
    """Send ``answer``; False where the parent is gone (a SIGKILLed gateway: a broken pipe, not a traceback)."""
    try:
        conn.send(answer)
    except OSError:  # BrokenPipeError, ConnectionResetError
        return False
    except Exception:  # an answer that cannot be pickled: say so instead
        return _answer(conn, ("error", traceback.format_exc(limit=8)))
    return True


def _die_with(parent: int) -> None:
    """On Linux the kernel sends this worker SIGTERM when the thread that started it ends (the gateway's loop,
    or the whole gateway, killed): no orphan goes on scoring for nobody. Elsewhere it ends at its next answer."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # it died before the call took effect
        os._exit(0)
