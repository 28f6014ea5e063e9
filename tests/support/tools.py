"""What a test needs of the machine: a command-line tool or a bundled server, a skip where it is missing and a
failure in CI (``CI=true``)."""

from __future__ import annotations

import os
import shutil

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


def require_tool(name: str) -> str:
    """Path of a command-line tool; a skip with the reason here, a failure in CI (CI=true)."""
    path = shutil.which(name)
    if path is None:
        if IN_CI:
            pytest.fail(f"{name} is required in CI but not on PATH")
        pytest.skip(f"{name} not on PATH")
    return path


def require_part(check, what: str) -> None:
    """Run ``check`` (it raises when a part such as the bundled tritonserver is missing): a skip with the reason
    here, a failure in CI (CI=true)."""
    try:
        check()
    except Exception as exc:
        if IN_CI:
            pytest.fail(f"{what} is required in CI: {exc}")
        pytest.skip(str(exc))
