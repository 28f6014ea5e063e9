"""Shared by `tests/test_cli_errors.py`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def _lastmile(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600)  # fmt: skip


def _one_line_exit_2(run: subprocess.CompletedProcess, *fragments: str) -> None:
    _one_line_exit(run, 2, *fragments)


def _one_line_exit(run: subprocess.CompletedProcess, status: int, *fragments: str) -> None:
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == status, run.stderr
    assert "Traceback" not in run.stderr and len(lines) == 1, run.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
