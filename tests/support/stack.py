"""Shared by `tests/test_up.py`."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

NARROW = ["--detectors", "d3_px,spectral", "--conditions", "original,spatial"]  # a fast stack for the test

ROOT = Path(__file__).resolve().parents[2]


PORTS = ["--kafka-port", "0", "--gateway-port", "0", "--monitor-port", "0", "--prometheus-port", "0"]


def readme_commands() -> list[list[str]]:
    block = re.search(r"<!-- tap-commands.*?```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    return [shlex.split(line.split("#")[0]) for line in block.splitlines() if line.startswith("lastmile ")]


def _cli(args: list[str]) -> list[str]:
    assert args[0] == "lastmile"
    return [sys.executable, "-m", "gateway.cli", *args[1:]]


def _stack_left(pgids: set[int]) -> list[str]:
    """Processes of those process groups still alive (their command lines). A zombie has exited: it waits only
    for this container's PID 1 to reap it, which not every container's init does."""
    left = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                zombie = "\nState:\tZ" in Path(f"/proc/{d}/status").read_text()
                if os.getpgid(int(d)) in pgids and not zombie:
                    left.append(Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode())
            except (ProcessLookupError, FileNotFoundError):
                pass
    return left


def _until(up: subprocess.Popen, prefix: str) -> list[str]:
    """`lastmile up`'s lines up to the first that starts with ``prefix`` (its stdout ends, and fails this, if it
    exits)."""
    lines = []
    for line in up.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith(prefix):
            return lines
    raise AssertionError(f"lastmile up exited before {prefix!r}: {lines}")
