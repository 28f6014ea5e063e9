"""The worker pool: real processes; a dead, overrunning or over-memory worker costs only its own job, and it is
replaced; a job that raises leaves its worker alive."""

from __future__ import annotations

import time

import pytest

from gateway.scoring.pool import JobError, VideoTimeout, WorkerCrashed, WorkerPool
from tests import pool_jobs


def _collect(pool: WorkerPool, n: int, timeout_s: float = 60) -> dict:
    out, deadline = {}, time.monotonic() + timeout_s
    while len(out) < n:
        assert time.monotonic() < deadline, f"only {len(out)} of {n} jobs finished"
        for d in pool.poll(0.2):
            out[d.job_id] = d
    return out


@pytest.fixture
def pool_factory():
    pools = []

    def make(**kwargs) -> WorkerPool:
        pool = WorkerPool(target=pool_jobs.job, initializer=pool_jobs.init, **kwargs)
        pools.append(pool)
        return pool

    yield make
    for p in pools:
        p.close()


def test_a_killed_worker_costs_only_its_own_job_and_is_replaced(pool_factory):
    pool = pool_factory(size=2, initargs=("t",))
    pool.submit("crash", ("crash", None))
    for i in range(6):
        pool.submit(i, ("double", i))
    done = _collect(pool, 7)
    assert isinstance(done["crash"].error, WorkerCrashed) and "SIGKILL" in str(done["crash"].error)
    assert all(done[i].error is None and done[i].result[:2] == ("t", 2 * i) for i in range(6))
    assert pool.crashes == 1 and len(pool.workers) == 2
    pool.submit("after", ("double", 21))
    assert _collect(pool, 1)["after"].result[1] == 42  # the replacement works


def test_the_deadline_and_the_memory_cap_kill_only_the_offending_job(pool_factory):
    pool = pool_factory(size=2, initargs=("t",), timeout_s=5.0, memory_mb=400)
    pool.submit("slow", ("sleep", 30))
    pool.submit("hungry", ("alloc", 800))
    pool.submit("fine", ("alloc", 50))
    done = _collect(pool, 3)
    assert isinstance(done["slow"].error, VideoTimeout)
    assert isinstance(done["hungry"].error, WorkerCrashed) and "memory" in str(done["hungry"].error)
    assert done["fine"].error is None and done["fine"].result == 50 * 2**20


def test_a_job_that_raises_leaves_its_worker_alive(pool_factory):
    pool = pool_factory(size=1, initargs=("t",))
    pool.submit("bad", ("nonsense", None))
    pool.submit("good", ("double", 1))
    done = _collect(pool, 2)
    assert isinstance(done["bad"].error, JobError) and "bad job" in str(done["bad"].error)
    assert done["good"].error is None and pool.crashes == 0


def test_a_worker_that_cannot_start_holds_no_job_and_says_why(pool_factory):
    pool = pool_factory(size=1, initargs=("t", True))
    pool.submit("waiting", ("double", 1))
    deadline = time.monotonic() + 30
    while pool.start_error is None:
        assert time.monotonic() < deadline
        assert pool.poll(0.2) == []  # the job is never handed to a worker that did not start
    assert "cannot start" in pool.start_error and pool.pending == 1 and pool.crashes == 0


PARENT = """
import sys, time
from gateway.scoring.pool import WorkerPool
from tests import pool_jobs
pool = WorkerPool(size=1, target=pool_jobs.job, initializer=pool_jobs.init, initargs=("t",))
pool.submit("long", ("sleep", 120))
while not (pool.workers[0].ready and pool.workers[0].job == "long"):
    pool.poll(0.1)
print(pool.workers[0].process.pid, flush=True)
time.sleep(600)
"""


def test_the_workers_of_a_killed_parent_end_at_once_and_quietly():
    """A SIGKILLed gateway left its workers scoring for nobody, then writing BrokenPipeError tracebacks: now the
    kernel ends them with their parent (Linux), mid-job, with nothing on stderr."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's (elsewhere a worker ends at its next answer)")
    root = Path(__file__).resolve().parent.parent
    parent = subprocess.Popen([sys.executable, "-c", PARENT], cwd=root, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)  # fmt: skip
    worker = int(parent.stdout.readline())
    parent.kill()
    parent.wait(30)
    deadline = time.monotonic() + 30  # well inside the job's 120 s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{worker}/stat").read_text().split(")")[-1].split()[0] == "Z":
                break  # dead, not yet reaped by whoever adopted it
        except FileNotFoundError:
            break
        time.sleep(0.1)  # polling another process's exit: there is nothing to wait on
    else:
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the worker outlived its parent")
    assert "Traceback" not in parent.stderr.read()


def test_the_session_end_check_names_a_process_a_test_left_alive():
    """tests/conftest.py's last teardown fails the run on what leftover_children() finds: a process this test
    process started that is still alive (a zombie, reaped or not, is none)."""
    import subprocess

    from tests.support.layers import leftover_children

    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        seen = leftover_children()
        assert any(pid == sleeper.pid and "sleep 60" in command for pid, command in seen), (sleeper.pid, seen)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert all(pid != sleeper.pid for pid, _ in leftover_children())
