"""The local servers that commands start (the Tansu broker, the bundled tritonserver) stop on SIGTERM, as a
supervisor or Kubernetes sends it, with every process they started and their staging folders; and the
python backend's stubs use the interpreter the command runs in, whatever is first on PATH."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from detectors.serving.processes import free_port, stop_group
from tests.support.tools import require_part


def _group_members(pgid: int) -> set[int]:
    """Live processes of a process group (read from /proc)."""
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                out.add(int(entry.name))
    return out


def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.add(int(entry.name))
            except OSError:
                continue
    return out


def _bound(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def _start(args: list[str], ready: str, timeout_s: float = 120) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gateway.cli", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + timeout_s
    try:
        for line in proc.stdout:
            if ready in line:
                return proc
            assert time.monotonic() < deadline, f"no {ready!r} within {timeout_s} s"
        raise AssertionError(f"exited with {proc.wait()} before {ready!r}")
    except BaseException:
        with _stopped_in_the_end(proc):  # a start that failed leaves nothing running
            raise


@contextlib.contextmanager
def _stopped_in_the_end(proc: subprocess.Popen):
    """``proc``, stopped (SIGTERM, then SIGKILL) if a failed assertion left it running: a test that fails must not
    leave a server behind (one such ``triton serve`` outlived its CI run)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _terminate_and_check(proc: subprocess.Popen, ports: list[int]) -> None:
    (server,) = _children(proc.pid)  # the server, leader of its own process group
    members = _group_members(server)
    assert server in members and all(_bound(p) for p in ports)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 0
    assert _group_members(server) == set(), "a process of the server's group outlived the command"
    assert not any(_bound(p) for p in ports)


def test_kafka_up_stops_its_broker_on_sigterm():
    from gateway.toolkit import tansu

    require_part(tansu.tansu_binary, "the Tansu broker")
    port = free_port()
    with _stopped_in_the_end(_start(["kafka", "up", "--port", str(port), "--partitions", "1"], "bootstrap:")) as proc:
        _terminate_and_check(proc, [port])


def test_triton_serve_stops_its_server_and_stubs_and_removes_its_staging_on_sigterm():
    from detectors.serving.local import bundled_server

    require_part(bundled_server, "the bundled tritonserver")
    staging_before = set(Path(tempfile.gettempdir()).glob("lastmile-triton-*"))
    ports = [free_port() for _ in range(3)]
    proc = _start(
        [
            "triton",
            "serve",
            "--grpc-port",
            str(ports[0]),
            "--http-port",
            str(ports[1]),
            "--metrics-port",
            str(ports[2]),
        ],
        "Triton ready",
    )
    with _stopped_in_the_end(proc):
        (server,) = _children(proc.pid)
        assert len(_group_members(server)) > 1  # the python backend's stubs run in the server's group
        staged = set(Path(tempfile.gettempdir()).glob("lastmile-triton-*")) - staging_before
        assert len(staged) == 1
        _terminate_and_check(proc, ports)
    assert not any(p.exists() for p in staged)


def test_local_triton_uses_the_interpreter_it_runs_in_whatever_is_on_path():
    """With only the system's folders on PATH (where another Python 3 may lie, without this one's packages)."""
    from detectors.serving.local import bundled_server

    require_part(bundled_server, "the bundled tritonserver")
    code = "from detectors.serving.local import LocalTriton\nwith LocalTriton() as s:\n    print('ready', s.url)\n"
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0 and "ready" in res.stdout, res.stderr[-2000:]


def test_stopping_a_stopped_group_again_spares_the_process_that_took_its_number():
    """``stop_group`` called twice (``stop`` then ``close``) sent SIGKILL to the group of a leader reaped long
    before: with 32,768 pids a new session leader had taken that number, and a CI run lost an unrelated process.
    The second stop now leaves a live process under the old number alone, and still ends a group that lives on."""
    first = subprocess.Popen(["sleep", "60"], start_new_session=True)
    stop_group(first, timeout_s=5)
    assert first.returncode == -signal.SIGTERM
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a session leader: its group is its pid
    try:
        first.pid = other.pid  # the number reused, as the kernel does once the group is gone
        stop_group(first, timeout_s=5)
    finally:
        other.terminate()
    # signals arrive in the order sent: a SIGKILL from the second stop would be what ended it
    assert other.wait(10) == -signal.SIGTERM, "the second stop killed a process that was not the server's"
    # a leader reaped by someone else's poll() while its children live on: the group still ends
    leader = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; exit 0"], start_new_session=True,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    child = int(leader.stdout.readline())
    leader.wait(10)
    assert child in _group_members(leader.pid)
    stop_group(leader, timeout_s=5)
    deadline = time.monotonic() + 10
    while child in _group_members(leader.pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # polling another process's end: there is nothing of ours to wait on
    assert child not in _group_members(leader.pid)
