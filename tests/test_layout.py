"""The shape of the code: small modules, every package shipped in the wheel. (Import layering and cycles are
checked by import-linter in tests/run.sh, from the contracts in pyproject.toml.)"""

from __future__ import annotations

import tomllib
from pathlib import Path

from setuptools import find_packages

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("transforms", "detectors", "gateway")
MAX_LINES = 300


def test_no_module_over_300_lines():
    too_long = {
        str(f.relative_to(ROOT)): n
        for room in ROOMS
        for f in (ROOT / room).rglob("*.py")
        if (n := len(f.read_text().splitlines())) > MAX_LINES
    }
    assert too_long == {}


def test_the_wheel_lists_every_package():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set(find_packages(str(ROOT), include=[f"{r}*" for r in ROOMS]))
    assert found <= listed, f"packages missing from pyproject.toml: {sorted(found - listed)}"
