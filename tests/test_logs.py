"""The services' logs: kafka-python's reconnect lines (tens while a broker is down) are kept to its warnings and
errors, each kind once a minute with a count of those held back; our own lines are never held."""

from __future__ import annotations

import logging
import subprocess
import sys

from gateway.cli.logs import ClientLines


def _record(name: str, msg: str, *args: object, level: int = logging.ERROR) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, msg, args, None)


def test_a_repeated_client_line_passes_once_a_minute_and_then_counts_what_it_held():
    now = [0.0]
    quiet = ClientLines("kafka", logging.WARNING, 60.0, clock=lambda: now[0])
    failed = "Bootstrap connection to %s failed: %s (backoff %.2f secs)"
    refused = ConnectionRefusedError("refused")
    assert quiet.filter(_record("kafka.net.manager", failed, "b-0", refused, 0.1))
    for backoff in (0.4, 1.8, 7.5):  # the same kind, other figures: held
        now[0] += 5
        assert not quiet.filter(_record("kafka.net.manager", failed, "b-0", refused, backoff))
    assert quiet.filter(_record("kafka.net.manager", f"Backoff {1.5:.2f} secs"))  # an f-string's line, then
    assert not quiet.filter(_record("kafka.net.manager", f"Backoff {3.5:.2f} secs"))  # the same but its figures
    assert quiet.filter(_record("kafka.net.manager", failed, "b-1", refused, 0.4))  # another broker: passes
    assert quiet.filter(_record("kafka.net.manager", failed, "b-0", TimeoutError("t"), 0.4))  # another error too
    assert quiet.filter(_record("kafka.net.manager", failed, "b-0", refused, 0.4, level=logging.CRITICAL))
    assert quiet.filter(_record("kafka.net.manager", "Bootstrap failed: %s", "timeout"))  # another kind: passes
    assert quiet.filter(_record("kafka.net.connection", failed, "b-0", refused, 1.0))  # another logger: passes
    assert all(quiet.filter(_record("lastmile.gateway", "not ready: %s", "x")) for _ in range(5))  # ours: never held
    assert all(quiet.filter(_record("kafkaesque", "x")) for _ in range(3))  # a name that only starts like it
    assert not quiet.filter(_record("kafka.conn", "Attempting %s", "x", level=logging.INFO))  # below WARNING
    now[0] = 61.0
    again = _record("kafka.net.manager", failed, "b-0", refused, 22.1)
    assert quiet.filter(again)
    assert again.getMessage() == (
        "Bootstrap connection to b-0 failed: refused (backoff 22.10 secs) [3 more like this held back since it was "
        "last shown]"
    )
    now[0] = 200.0
    fresh = _record("kafka.net.manager", failed, "b-0", refused, 0.1)
    assert quiet.filter(fresh) and "more like this" not in fresh.getMessage()


def _run(level: str) -> list[str]:
    code = (
        "import logging\n"
        "from gateway.cli.logs import configure_logging\n"
        f"configure_logging({level!r})\n"
        "client = logging.getLogger('kafka.net.manager')\n"
        "for i in range(20):\n"
        "    client.info('Attempting bootstrap %d', i)\n"
        "    client.warning('Bootstrap not ready: waiting %.2f secs', i / 7)\n"
        "    client.error('Connection failed: %s', 'refused')\n"
        "    logging.getLogger('lastmile.gateway').info('ours %d', i)\n"
        "    logging.getLogger('lastmile.gateway').error('our error %d', i)\n"
    )
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stderr
    return err.splitlines()


def test_a_service_logs_ours_at_its_level_and_the_clients_from_warning_once_per_kind():
    lines = _run("INFO")
    assert sum("ours" in line for line in lines) == 20 and sum("our error" in line for line in lines) == 20
    assert [line.split(" ", 2)[2] for line in lines if "kafka" in line] == [
        "WARNING kafka.net.manager: Bootstrap not ready: waiting 0.00 secs",
        "ERROR kafka.net.manager: Connection failed: refused",
    ]
    lines = _run("ERROR")  # the client's warnings not shown where ours are not
    assert not any("ours" in line for line in lines) and sum("our error" in line for line in lines) == 20
    assert [line.split(" ", 2)[2] for line in lines if "kafka" in line] == [
        "ERROR kafka.net.manager: Connection failed: refused"
    ]
