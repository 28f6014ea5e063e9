"""The services' logs: kafka-python's reconnect lines (tens while a broker is down) are kept to its warnings and
errors, each kind once a minute with a count of those held back; our own lines are never held."""

from __future__ import annotations

import logging
import subprocess
import sys

from gateway.cli.logs import RepeatsQuieted


def _record(name: str, msg: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, None)


def test_a_repeated_client_line_passes_once_a_minute_and_then_counts_what_it_held():
    now = [0.0]
    quiet = RepeatsQuieted("kafka", 60.0, clock=lambda: now[0])
    failed = "Bootstrap connection to %s failed: %s (backoff %.2f secs)"
    assert quiet.filter(_record("kafka.net.manager", failed, "b-0", "refused", 0.1))
    for backoff in (0.4, 1.8, 7.5):  # the same template, other figures: held
        now[0] += 5
        assert not quiet.filter(_record("kafka.net.manager", failed, "b-0", "refused", backoff))
    assert quiet.filter(_record("kafka.net.manager", "Bootstrap failed: %s", "timeout"))  # another kind: passes
    assert quiet.filter(_record("kafka.net.connection", failed, "b-0", "refused", 1.0))  # another logger: passes
    assert all(quiet.filter(_record("lastmile.gateway", "not ready: %s", "x")) for _ in range(5))  # ours: never held
    assert all(quiet.filter(_record("kafkaesque", "x")) for _ in range(3))  # a name that only starts like it
    now[0] = 61.0
    again = _record("kafka.net.manager", failed, "b-0", "refused", 22.1)
    assert quiet.filter(again)
    assert (
        again.getMessage()
        == "Bootstrap connection to b-0 failed: refused (backoff 22.10 secs) [3 more like this in the last 60 s]"
    )
    now[0] = 200.0
    fresh = _record("kafka.net.manager", failed, "b-0", "refused", 0.1)
    assert quiet.filter(fresh) and "more like this" not in fresh.getMessage()


def test_a_service_logs_ours_at_its_level_and_the_clients_from_warning_once_per_kind():
    code = (
        "import logging\n"
        "from gateway.cli.logs import configure_logging\n"
        "configure_logging('INFO')\n"
        "client = logging.getLogger('kafka.net.manager')\n"
        "for i in range(20):\n"
        "    client.info('Attempting bootstrap %d', i)\n"
        "    client.error('Connection failed: %s', i)\n"
        "    logging.getLogger('lastmile.gateway').info('ours %d', i)\n"
    )
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stderr
    lines = err.splitlines()
    assert sum("ours" in line for line in lines) == 20
    assert [line.split(" ", 2)[2] for line in lines if "kafka" in line] == [
        "ERROR kafka.net.manager: Connection failed: 0"
    ]
