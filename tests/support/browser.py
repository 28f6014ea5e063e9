"""Headless Chromium (Debian's ``chromium`` package) for the pages the services serve: the DOM after the page's
scripts ran, and a screenshot."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from tests.support.tools import require_tool

WINDOW = (1280, 1600)  # pixels of a screenshot (the page must fit a 1280 px window)


def _run(url: str, *args: str, budget_ms: int) -> subprocess.CompletedProcess:
    binary = require_tool("chromium")
    with tempfile.TemporaryDirectory(prefix="lastmile-chromium-") as profile:  # one profile per run: no lock shared
        cmd = [
            binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
            f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}", *args, url,
        ]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=True)


def dom(url: str, budget_ms: int = 12_000) -> str:
    """The page's DOM after ``budget_ms`` of virtual time (its timers fast-forwarded: a refresh runs)."""
    return _run(url, "--dump-dom", budget_ms=budget_ms).stdout


def screenshot(url: str, path: Path, budget_ms: int = 2_000) -> Path:
    """A PNG of the page, ``WINDOW`` pixels."""
    _run(url, f"--screenshot={path}", f"--window-size={WINDOW[0]},{WINDOW[1]}", budget_ms=budget_ms)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"no PNG written to {path}"
    return path
